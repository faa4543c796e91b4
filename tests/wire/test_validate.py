"""Strict validation rejects the seed failure shapes; repair fixes them explicitly."""

from __future__ import annotations

import importlib
import logging

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentledger import (
    HistoryError,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserError,
)
from agentledger.messages import decode, encode
from agentledger.wire import (
    NOT_EXECUTED,
    FindingKind,
    HistoryChecker,
    RepairKind,
    check,
    repair,
    validate,
)


def _call(call_id: str, name: str = "search") -> ToolUseBlock:
    return ToolUseBlock(id=call_id, name=name, input={"q": "x"})


def _result(call_id: str, text: str = "ok") -> ToolResultBlock:
    return ToolResultBlock(id=call_id, name="search", output=text)


def _interrupted() -> list[Msg]:
    """Seed 003: the user interrupted while the model was reasoning; its call never ran."""
    return [
        Msg.user("find flights", id="u1"),
        Msg.assistant(
            [ThinkingBlock(thinking="search first"), TextBlock(text="Searching."), _call("c1")],
            id="a1",
        ),
        Msg.user("stop, use trains", id="u2"),
    ]


SEED_SHAPES = {
    "unanswered_call": (_interrupted(), FindingKind.UNANSWERED_CALL),
    "orphan_result": (
        [Msg.user("hi", id="u1"), Msg.tool(_result("ghost"), id="t1"), Msg.assistant("hello")],
        FindingKind.ORPHAN_RESULT,
    ),
    "duplicate_result": (
        [
            Msg.user("hi", id="u1"),
            Msg.assistant(_call("c1"), id="a1"),
            Msg.tool(_result("c1"), id="t1"),
            Msg.tool(_result("c1", "again"), id="t2"),
        ],
        FindingKind.DUPLICATE_RESULT,
    ),
    "empty_assistant": (
        [Msg.user("hi", id="u1"), Msg.assistant([], id="a1"), Msg.user("hello?", id="u2")],
        FindingKind.EMPTY_ASSISTANT,
    ),
}


@pytest.mark.parametrize("shape", sorted(SEED_SHAPES))
@pytest.mark.parametrize("target", ["strict", "openai", "anthropic", "agui"])
def test_each_seed_shape_is_rejected(shape: str, target: str) -> None:
    msgs, kind = SEED_SHAPES[shape]
    findings = validate(msgs, target=target)  # type: ignore[arg-type]
    assert kind in {f.kind for f in findings}
    with pytest.raises(HistoryError) as info:
        check(msgs, target=target)  # type: ignore[arg-type]
    assert info.value.findings == tuple(findings)


def test_finding_names_the_place_and_the_call() -> None:
    (finding,) = validate(_interrupted())
    assert finding.kind is FindingKind.UNANSWERED_CALL
    assert (finding.index, finding.message_id, finding.tool_call_id) == (1, "a1", "c1")
    assert "c1" in str(finding)


@pytest.mark.parametrize("mode", ["drop", "error_result"])
@pytest.mark.parametrize("shape", sorted(SEED_SHAPES))
def test_repaired_history_is_accepted(shape: str, mode: str) -> None:
    msgs, _ = SEED_SHAPES[shape]
    report = repair(msgs, unanswered=mode)  # type: ignore[arg-type]
    assert report.changed
    for target in ("strict", "openai", "anthropic", "agui"):
        assert validate(report.messages, target=target) == []  # type: ignore[arg-type]
    check(report.messages)


def test_drop_mode_keeps_text_and_thinking_of_the_interrupted_turn() -> None:
    msgs = _interrupted()
    report = repair(msgs)
    assert [m.id for m in report.messages] == ["u1", "a1", "u2"]
    assert report.messages[1].tool_calls == ()
    assert report.messages[1].content == msgs[1].content[:2]
    assert [c.kind for c in report.changes] == [RepairKind.DROPPED_UNANSWERED_CALL]
    assert report.changes[0].tool_call_id == "c1"


def test_drop_mode_drops_a_call_only_assistant_message() -> None:
    msgs = [Msg.user("go", id="u"), Msg.assistant(_call("c1"), id="a"), Msg.user("no", id="u2")]
    report = repair(msgs)
    assert [m.id for m in report.messages] == ["u", "u2"]
    assert [c.kind for c in report.changes] == [
        RepairKind.DROPPED_UNANSWERED_CALL,
        RepairKind.DROPPED_EMPTY_MESSAGE,
    ]


def test_error_result_mode_answers_right_after_the_calling_message() -> None:
    msgs = _interrupted()
    report = repair(msgs, unanswered="error_result")
    assert [m.id for m in report.messages] == ["u1", "a1", "a1:results", "u2"]
    assert report.messages[1] is msgs[1]  # unchanged messages are the same values
    (result,) = report.messages[2].tool_results
    assert (result.id, result.name, result.is_error, result.text) == (
        "c1",
        "search",
        True,
        NOT_EXECUTED,
    )


def test_validation_and_repair_never_mutate_their_input() -> None:
    for msgs, _ in SEED_SHAPES.values():
        snapshot = list(msgs)
        digests = [m.digest for m in msgs]
        validate(msgs)
        repair(msgs)
        repair(msgs, unanswered="error_result")
        assert msgs == snapshot and all(a is b for a, b in zip(msgs, snapshot))
        assert [m.digest for m in msgs] == digests


def test_repair_logs_every_change(caplog: pytest.LogCaptureFixture) -> None:
    msgs, _ = SEED_SHAPES["duplicate_result"]
    with caplog.at_level(logging.WARNING, logger="agentledger.wire"):
        report = repair(msgs)
    assert len(caplog.records) == len(report.changes) == 2  # second result, then its empty msg
    assert all(r.levelno == logging.WARNING for r in caplog.records)
    assert "c1" in caplog.records[0].getMessage()


def test_late_result_is_strict_only_and_repair_moves_it() -> None:
    msgs = [
        Msg.user("go", id="u1"),
        Msg.assistant(_call("c1"), id="a1"),
        Msg.user("are you there?", id="u2"),
        Msg.tool(_result("c1"), id="t1"),
    ]
    assert [f.kind for f in validate(msgs)] == [FindingKind.LATE_RESULT]
    assert validate(msgs, target="agui") == []
    report = repair(msgs)
    assert [m.id for m in report.messages] == ["u1", "a1", "a1:results", "u2"]
    assert report.messages[2].tool_results == msgs[3].tool_results
    assert validate(report.messages) == []


def test_results_must_follow_before_the_next_assistant_turn() -> None:
    msgs = [
        Msg.user("go"),
        Msg.assistant([_call("c1"), _call("c2")]),
        Msg.tool(_result("c1")),
        Msg.assistant("partial"),
        Msg.tool(_result("c2")),
    ]
    assert [f.kind for f in validate(msgs)] == [FindingKind.LATE_RESULT]


def test_more_shapes() -> None:
    before_call = [Msg.user("x"), Msg.tool(_result("c1")), Msg.assistant(_call("c1"))]
    kinds = {f.kind for f in validate(before_call)}
    assert kinds == {FindingKind.RESULT_BEFORE_CALL, FindingKind.UNANSWERED_CALL}

    dup_ids = [
        Msg.user("x"),
        Msg.assistant(_call("c1")),
        Msg.tool(_result("c1")),
        Msg.assistant(_call("c1")),
    ]
    assert [f.kind for f in validate(dup_ids)] == [FindingKind.DUPLICATE_CALL_ID]

    misplaced = [Msg.user([TextBlock(text="x"), _call("c9")]), Msg.tool([])]
    kinds = {f.kind for f in validate(misplaced)}
    assert FindingKind.MISPLACED_BLOCK in kinds and FindingKind.EMPTY_TOOL_MESSAGE in kinds


def test_anthropic_order_rules() -> None:
    msgs = [Msg.system("s"), Msg.assistant("hello"), Msg.user("hi"), Msg.system("late")]
    assert validate(msgs, target="openai") == []
    findings = validate(msgs, target="anthropic")
    assert [(f.kind, f.index) for f in findings] == [
        (FindingKind.BAD_ROLE_ORDER, 1),
        (FindingKind.BAD_ROLE_ORDER, 3),
    ]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(UserError):
        validate([], target="gemini")  # type: ignore[arg-type]
    with pytest.raises(UserError):
        repair([], unanswered="ignore")  # type: ignore[arg-type]


# -- property: any pairing mess is repaired into a strictly valid history -----------------------
_ids = st.sampled_from(["c0", "c1", "c2", "c3"])
_history_msg = st.one_of(
    st.just(Msg.user("u", created_at=None)),
    st.just(Msg.assistant("a", created_at=None)),
    st.just(Msg.assistant([], created_at=None)),
    st.lists(_ids, max_size=3).map(
        lambda ids: Msg.assistant([TextBlock(text="t")] * (len(ids) % 2) + [_call(i) for i in ids])
    ),
    st.lists(_ids, max_size=3).map(lambda ids: Msg.tool([_result(i) for i in ids])),
)


@given(msgs=st.lists(_history_msg, max_size=12), mode=st.sampled_from(["drop", "error_result"]))
@example(  # one turn in two assistant messages: error results go after both, not between
    msgs=[
        Msg.assistant([_call("c0"), _call("c1")], created_at=None),
        Msg.assistant([TextBlock(text="t"), _call("c2")], created_at=None),
        Msg.tool([_result("c0")]),
    ],
    mode="error_result",
)
def test_repair_always_yields_a_strictly_valid_history(msgs: list[Msg], mode: str) -> None:
    digests = [m.digest for m in msgs]
    report = repair(msgs, unanswered=mode)  # type: ignore[arg-type]
    assert validate(report.messages, target="strict") == []
    assert validate(report.messages, target="openai") == []
    assert [m.digest for m in msgs] == digests
    again = repair(report.messages, unanswered=mode)  # type: ignore[arg-type]
    assert again.changes == [] and again.messages == report.messages
    if not validate(msgs):
        assert report.changes == [] and report.messages == msgs


# -- HistoryChecker: a growing history checked from where the last valid one ended -------------
validate_module = importlib.import_module("agentledger.wire.validate")  # the package's name for
# it is the function
_any_msg = st.one_of(_history_msg, st.just(Msg.system("s", created_at=None)))


@given(data=st.data(), target=st.sampled_from(["strict", "openai", "anthropic", "agui"]))
def test_a_checker_raises_exactly_what_check_raises_as_a_history_grows(
    data: st.DataObject, target: str
) -> None:
    checker = HistoryChecker(target)  # type: ignore[arg-type]
    history: list[Msg] = []
    for _ in range(data.draw(st.integers(1, 8))):
        step = data.draw(st.sampled_from(["grow", "grow", "grow", "repair", "cut", "edit"]))
        if step == "grow":
            history = history + data.draw(st.lists(_any_msg, max_size=4))
        elif step == "repair":  # a valid history, often with the objects of the last one
            history = repair(history, target=target).messages  # type: ignore[arg-type]
        elif step == "cut":
            history = history[: data.draw(st.integers(0, len(history)))]
        elif history:
            at = data.draw(st.integers(0, len(history) - 1))
            history = [*history[:at], data.draw(_any_msg), *history[at + 1 :]]
        expected = validate(history, target=target)  # type: ignore[arg-type]
        if expected:
            with pytest.raises(HistoryError) as info:
                checker.check(history)
            assert list(info.value.findings) == expected
            with pytest.raises(HistoryError) as whole:
                check(history, target=target)  # type: ignore[arg-type]
            assert str(info.value) == str(whole.value)
        else:
            checker.check(history)
            calls = {c.id for m in history for c in m.tool_calls}
            assert checker.call_ids == calls


def test_a_checker_walks_only_what_was_added_to_a_history_that_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    starts: list[int] = []
    real = validate_module._Validator

    def recording(msgs: list[Msg], target: str, start: int = 0, before: object = None) -> object:
        starts.append(start)
        return real(msgs, target, start, before)  # type: ignore[arg-type]

    monkeypatch.setattr(validate_module, "_Validator", recording)
    turn = [Msg.user("u"), Msg.assistant([_call("c1")]), Msg.tool([_result("c1")])]
    history = turn * 1  # the same objects, so a copy begins with the history that passed
    checker = HistoryChecker()
    checker.check(history)
    checker.check([*history, Msg.assistant("a"), Msg.user("again")])
    edited = [Msg.user("changed"), *history[1:]]
    checker.check(edited)
    with pytest.raises(HistoryError):  # the second call c1 is refused even though c1 passed
        checker.check([*edited, Msg.assistant([_call("c1")]), Msg.tool([_result("c1")])])
    assert starts == [0, 3, 0, 3]


def test_a_checker_takes_equal_messages_for_the_history_that_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A history rebuilt from the same content (reloaded, decoded again) is the same history:
    only what follows it is walked; one message that differs makes the whole walked again."""
    starts: list[int] = []
    real = validate_module._Validator

    def recording(msgs: list[Msg], target: str, start: int = 0, before: object = None) -> object:
        starts.append(start)
        return real(msgs, target, start, before)  # type: ignore[arg-type]

    monkeypatch.setattr(validate_module, "_Validator", recording)
    history = [Msg.user("u"), Msg.assistant([_call("c1")]), Msg.tool([_result("c1")])]
    checker = HistoryChecker()
    checker.check(history)
    copies = [decode(encode(m)) for m in history]
    assert all(c is not m for c, m in zip(copies, history, strict=True))
    checker.check([*copies, Msg.assistant("a")])
    grown = [*copies, Msg.assistant("a")]
    checker.check([Msg.user("v"), *grown[1:], Msg.user("b")])
    assert starts == [0, 3, 0]
