"""``bench.context_edits`` measures what it says, on a small session."""

from __future__ import annotations

from pathlib import Path

from bench.context_edits import main, measure


def test_each_edit_kind_writes_what_the_report_claims(tmp_path: Path) -> None:
    rows = {r.kind: r for r in measure(64, tmp_path)}
    assert rows["evict"].rows == 1 and 2_000 < rows["evict"].bytes_written < 3_500
    assert rows["prune, one step"].rows == 1 and rows["prune, one step"].bytes_written < 1_000
    assert rows["prune, first pass"].rows == 64 // 4 - 3
    # the kept messages are aligned by content: only the summary is written
    assert rows["compact, keep 8"].rows == 1
    assert rows["compact, keep half"].rows == 1


def test_the_script_prints_a_table(capsys) -> None:
    main(["--sizes", "16"])
    out = capsys.readouterr().out
    assert out.startswith("| messages | edit |") and "| 16 | evict | 1 |" in out
