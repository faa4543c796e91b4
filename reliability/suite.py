"""What ``python -m reliability`` runs: the tests of each area, and the scale of each mode.

The tests are the single implementation of every check; this module only selects them and
sets the environment variables that size them. Quick mode is the size CI runs (the tests'
defaults); full mode is the release run whose results go in ``docs/reliability.md``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Area:
    """One part of the report: a title, what it shows, and the pytest node ids that show it."""

    name: str
    title: str
    claim: str
    nodes: tuple[str, ...]


_PROCESSES = "tests/store/test_processes.py::"
_POSTGRES = "tests/store/test_postgres.py::"
_REPLAY = "tests/store/test_jsonl_replay.py::"
_JSONL_FILES = "tests/store/test_jsonl_files.py::"
_SQLITE_FILES = "tests/store/test_sqlite_files.py::"

AREAS = (
    Area(
        "crash",
        "Crash: SIGKILL at random points",
        "Every reopen loads a committed version (the last acknowledged or the one in flight, "
        "never older, never a mix) and the next save works.",
        (
            _PROCESSES + "test_sigkill_mid_save_leaves_a_committed_version",
            _PROCESSES + "test_sigkill_of_concurrent_writers_leaves_committed_versions",
            "tests/store/test_crash_ops.py",
            "tests/store/test_crash_migrate.py",
            "tests/agent/test_crash.py",
        ),
    ),
    Area(
        "damage",
        "Torn writes and damaged bytes",
        "Each trial ends in the exact committed state or a typed error naming the damage; "
        "nothing silent.",
        (
            _REPLAY + "test_every_flipped_byte_is_an_error_or_the_exact_state",
            _REPLAY + "test_flips_in_a_torn_tail_only_lose_the_torn_tail",
            _REPLAY + "test_truncation_at_every_offset_of_the_last_two_versions",
            "tests/store/test_sqlite_damage.py",
        ),
    ),
    Area(
        "faults",
        "Disk full, I/O errors, killed connections, server faults",
        "Each failed save is typed, the previous version stays loadable, the reported outcome "
        "equals the durable state, and the next save works.",
        (
            _JSONL_FILES + "test_a_file_size_limit_is_a_typed_error_that_leaves_the_log_intact",
            _JSONL_FILES + "test_a_purge_record_that_cannot_be_written_is_a_typed_error",
            _JSONL_FILES + "test_a_read_error_is_typed",
            _JSONL_FILES + "test_a_full_disk_is_a_typed_error_that_leaves_the_log_intact",
            _SQLITE_FILES + "test_a_file_size_limit_fails_the_save_and_keeps_the_previous_version",
            _SQLITE_FILES + "test_a_full_disk_fails_the_save_and_keeps_the_previous_version",
            _POSTGRES + "test_saves_under_killed_connections_report_what_is_durable",
            _POSTGRES + "test_lease_survives_a_dropped_lease_connection",
            "tests/server/test_faults.py",
        ),
    ),
    Area(
        "contention",
        "Contention: processes, threads and asyncio tasks",
        "Every acknowledged commit is in the final state exactly once, in its version; each "
        "save with expected_version wins a version or gets a conflict.",
        (
            _PROCESSES + "test_contending_writers_lose_nothing",
            _PROCESSES + "test_eight_writers_without_expected_version_lose_no_acknowledged_commit",
            _PROCESSES + "test_run_lease_holds_across_processes_and_dies_with_its_holder",
            _POSTGRES + "test_eight_processes_append_to_eight_sessions",
            _POSTGRES + "test_four_processes_contending_for_one_session_lose_nothing",
            _POSTGRES + "test_four_processes_shifting_one_session_commit_exactly_what_each_saved",
            _POSTGRES + "test_eight_processes_without_expected_version_lose_no_acknowledged_commit",
            _POSTGRES + "test_lease_is_exclusive_across_processes_and_sigkill_frees_it",
            "tests/store/test_contention.py",
        ),
    ),
    Area(
        "hostile input",
        "Hostile input",
        "Every input is refused with a typed error or read exactly; never an untyped error. "
        "Over HTTP: every answer is a 2xx or a 4xx that says what was wrong, never a 5xx or a "
        "dropped connection, and every committed version still loads exactly.",
        (
            "tests/messages/test_fuzz.py",
            "tests/store/test_import_fuzz.py",
            "tests/server/test_app.py::test_a_malformed_body_is_refused_with_a_readable_422",
            "tests/server/test_app.py::test_a_body_over_the_limit_is_refused_with_413",
            "tests/server/test_hostile_http.py",
            "tests/server/test_query_values.py",
        ),
    ),
    Area(
        "load",
        "Load: server workers on one PostgreSQL",
        "Under concurrent clients every acknowledged run is stored exactly once, in order, "
        "answered, and strictly valid; runs queued on one busy thread all run in turn.",
        (
            "tests/server/test_load.py",
            "tests/server/test_lease_waits.py",
        ),
    ),
    Area(
        "isolation",
        "Isolation: tenants and offloaded files",
        "A token never reads or changes another tenant's thread through any route of the app; "
        "offloaded tool output is written only inside its root and read only by its own thread.",
        (
            "tests/server/test_app.py::test_tokens_map_to_tenants_and_threads_stay_in_theirs",
            "tests/server/test_isolation.py",
            "tests/context/test_offload.py::test_hostile_call_ids_and_tool_names_write_only_inside_the_root",
            "tests/context/test_offload.py::test_read_offloaded_never_reads_outside_the_root_or_the_session",
            "tests/context/test_offload.py::test_a_symlink_out_of_the_root_is_refused",
        ),
    ),
)

#: Environment of each mode. Quick leaves every test at its CI size.
MODES: dict[str, dict[str, str]] = {
    "quick": {},
    "full": {
        "AGENTLEDGER_FUZZ": "long",
        "AGENTLEDGER_KILLS": "200",
        "AGENTLEDGER_CONCURRENT_KILLS": "200",
        "AGENTLEDGER_OPS_KILLS": "200",
        "AGENTLEDGER_MIGRATE_KILLS": "50",
        "AGENTLEDGER_AGENT_KILLS": "100",
        "AGENTLEDGER_PG_FAULT_SAVES": "400",
        "AGENTLEDGER_CONTENTION_SAVES": "100",
        "AGENTLEDGER_HTTP_FUZZ": "5000",
        "AGENTLEDGER_LOAD_WORKERS": "4",
        "AGENTLEDGER_LOAD_CLIENTS": "24",
        "AGENTLEDGER_LOAD_RUNS": "30",
    },
}


def area_of(node: str, areas: tuple[Area, ...] = AREAS) -> str:
    """The area whose selection holds ``node`` (a test's full node id)."""
    for area in areas:
        if any(node == sel or node.startswith((sel + "::", sel + "[")) for sel in area.nodes):
            return area.name
    return "other"
