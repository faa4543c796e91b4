"""The words search finds messages by: the rule of ``search_words``, and the one promise it
exists for: a query finds the same messages on PostgreSQL (which indexes the words the client
cuts) as on SQLite (whose FTS5 ``unicode61 remove_diacritics 2`` tokenizer cuts its own)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import Ledger, Msg
from agentledger.store.base import snippet_around
from agentledger.store.search_words import (
    _WORD,
    MAX_INDEXED_CHARS,
    MAX_WORD_BYTES,
    cut_word,
    first_word_at,
    has_words,
    prefix_query,
    query_words,
    tsvector_literal,
    words,
)
from tests.store.backends import LedgerOn, backend, ledger_on  # noqa: F401  (fixtures)

# Words with the cases, accents, ligatures and digits users type, and the separators between
# them (punctuation, underscores, NUL, query operators, non-Latin text).
_PIECES = ["Café", "CAFE", "crème", "Brûlée", "naïve", "ﬁle", "straße", "x2", "42"]
_PIECES += ["\uff26\uff55\uff4c\uff4c"]  # full-width "Full"
_PIECES += ["über", "Zoë", "résumé", "e-mail", "snake_case", "a:b", "日本語", "ДОМ", "dom"]
_SEPARATORS = [" ", "  ", "\n", ", ", "-", "_", "\x00", " & ", "!", "'", '"', ":*", "(", "|"]

texts = st.lists(st.sampled_from(_PIECES + _SEPARATORS), max_size=12).map("".join)

# Characters of the scripts people write in, where the rule and unicode61 agree: they part on
# code points SQLite's older Unicode tables do not know (newer emoji are letters there), on
# case variants only ``casefold`` joins (a final sigma, the micro sign) and on Latin letters
# with two marks (Latin Extended-B: unicode61 keeps "ǡ", the rule gives "a").
_SCRIPTS = [(0x0, 0x7E), (0xA0, 0x17E), (0x386, 0x3C1), (0x3C3, 0x3CE), (0x400, 0x4FF)]
_SCRIPTS += [(0x5D0, 0x5EA), (0x621, 0x64A), (0x3041, 0x30FF), (0x4E00, 0x4E80), (0x2000, 0x2064)]
_CHARS = [
    chr(c)
    for low, high in _SCRIPTS
    for c in range(low, high + 1)
    if c != 0xB5 and unicodedata.category(chr(c)) != "Cn"
]
any_texts = texts | st.text(st.sampled_from(_CHARS), max_size=20)


@given(st.text())
def test_words_are_lowercase_letters_and_digits_without_marks(text: str) -> None:
    for word in words(text):
        assert word and all(ch.isalnum() for ch in word), word
        assert word == word.lower()
        assert not any(0x300 <= ord(ch) <= 0x36F for ch in word)


@given(st.text(st.characters(max_codepoint=127)))
def test_the_ascii_shortcut_cuts_as_the_regular_expression_does(text: str) -> None:
    assert words(text) == _WORD.findall(text.lower())


@given(texts)
def test_the_same_word_in_any_case_or_accent_is_one_word(text: str) -> None:
    plain = unicodedata.normalize("NFD", text)
    assert words(text.lower()) == words(text) == words(plain)
    if text.upper().lower() == text.lower():  # "ß" upper-cases to "SS", another word
        assert words(text.upper()) == words(text)


def test_examples() -> None:
    assert words("Café-au-lait, x_2 Zoë") == ["cafe", "au", "lait", "x", "2", "zoe"]
    assert words("\uff26ine \ufb01le λόγος") == ["\uff46ine", "\ufb01le", "λόγος"]  # as unicode61
    assert tsvector_literal("b a b") in ("a b", "b a") and tsvector_literal("!! _") is None
    assert prefix_query("fox & !fox dog:*") == "fox:* & dog:*"
    assert prefix_query("' OR 1=1 --") == "or:* & 1:*"
    assert prefix_query("  !!! ") is None
    assert words("a " * MAX_INDEXED_CHARS + "late") == ["a"] * (MAX_INDEXED_CHARS // 2)
    # a word past PostgreSQL's lexeme limit is indexed by its first 2,047 bytes
    assert sorted(tsvector_literal("y" * 3000 + " short").split()) == ["short", "y" * 2047]


@pytest.mark.parametrize(
    ("word", "cut"),
    [
        ("y" * 2047, "y" * 2047),
        ("y" * 2048, "y" * 2047),
        ("\u0436" * 1100, "\u0436" * 1023),  # 2 bytes each: 2,046 bytes
        ("ab" + "\u65e5" * 700, "ab" + "\u65e5" * 681),  # the 682nd would end at byte 2,048
        ("short", "short"),
    ],
    ids=["2047 bytes", "2048 bytes", "two bytes a character", "a character cut in two", "short"],
)
def test_a_word_counts_for_its_first_2047_bytes_cut_between_characters(word: str, cut: str) -> None:
    assert cut_word(word) == cut and len(cut.encode()) <= MAX_WORD_BYTES
    assert query_words(f"{word} {word}") == [cut]


@given(any_texts | texts.map(lambda t: unicodedata.normalize("NFD", t)), st.data())
def test_a_snippet_is_centred_on_the_first_word_a_query_word_prefixes(
    text: str, data: st.DataObject
) -> None:
    """``first_word_at`` finds a word exactly when ``words`` holds one with that prefix, at
    the start of a word, and never after a word that has it."""
    cut = words(text)
    prefix = data.draw(
        st.sampled_from(cut).flatmap(lambda w: st.integers(1, len(w)).map(lambda n: w[:n]))
        if cut
        else st.sampled_from(["a", "zz", "é"])
    )
    at = first_word_at(text, prefix)
    assert (at >= 0) == any(w.startswith(prefix) for w in cut)
    if at >= 0:
        assert at == 0 or not text[at - 1].isalnum()
        assert not any(w.startswith(prefix) for w in words(text[:at]))
        assert any(w.startswith(prefix) for w in words(text[at:]))


@given(any_texts | st.text(), st.data())
def test_a_message_has_the_words_that_start_its_words(text: str, data: st.DataObject) -> None:
    """``has_words``, the match of the stores that scan, takes a shortcut for ASCII text: it
    must say what ``words`` says, for any text and any query word."""
    cut = words(text)
    prefixes = st.sampled_from(cut).flatmap(lambda w: st.integers(1, len(w)).map(lambda n: w[:n]))
    wanted = data.draw(
        st.lists(
            (prefixes if cut else st.nothing())
            | st.sampled_from(["a", "zz", "é", "\u0131", "k", "\ufb01", "日本"]),
            min_size=1,
            max_size=3,
        )
    )
    expected = all(any(w.startswith(q) for w in cut) for q in wanted)
    assert has_words(text, wanted) == expected


def test_snippet_examples() -> None:
    assert first_word_at("Un café crème", "creme") == 8
    assert first_word_at('the quick "fox" jumps', "fox") == 11
    assert first_word_at("cafe\u0301s et thé", "cafes") == 0  # a mark between its letters
    assert first_word_at("xfoo foo", "foo") == 5 and first_word_at("abc", "x") == -1
    assert first_word_at("a " * MAX_INDEXED_CHARS + "late", "late") == -1  # not indexed either


# -- the same hits on PostgreSQL and SQLite -----------------------------------------------------
@pytest.fixture(scope="module")
def pg_and_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ledger, Ledger]]:
    from agentledger.store.postgres import PostgresStore
    from tests.store import pg

    url = pg.require_server()
    path: Path = tmp_path_factory.mktemp("search") / "s.db"
    with pg.fresh_schema(url) as schema:
        store = PostgresStore(url, schema=schema, pool_min=1, pool_max=2)
        try:
            yield Ledger(store), Ledger(f"sqlite:///{path}")
        finally:
            store.close()


def _found(ledger: Ledger, query: str) -> set[tuple[str, str, int]]:
    return {(h.session_id, h.msg_id, h.position) for h in ledger.search(query, limit=1000)}


@pytest.mark.postgres
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(messages=st.lists(any_texts, min_size=1, max_size=6), data=st.data())
def test_postgres_finds_what_sqlite_finds(
    pg_and_sqlite: tuple[Ledger, Ledger], messages: list[str], data: st.DataObject
) -> None:
    """Any text, any query: the same (session, message, position) hits on both backends. The
    query is often a piece of a message (cut anywhere: every query word is a prefix)."""
    piece = st.sampled_from(messages).flatmap(
        lambda text: st.tuples(st.integers(0, len(text)), st.integers(1, 12)).map(
            lambda cut: text[cut[0] : cut[0] + cut[1]]
        )
    )
    query = data.draw(
        piece | st.lists(st.sampled_from(_PIECES + _SEPARATORS), max_size=4).map("".join)
    )
    on_pg, on_sqlite = pg_and_sqlite
    session = f"s{abs(hash((tuple(messages), query)))}"
    msgs = [Msg.user(text, id=f"m{i}") for i, text in enumerate(messages)]
    for ledger in (on_pg, on_sqlite):
        ledger.save(session, msgs)
    assert _found(on_pg, query) == _found(on_sqlite, query), (messages, query)


# -- the same hits on the stores that scan -----------------------------------------------------
@pytest.fixture(scope="module")
def scanning_and_sqlite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ledger, ...]:
    root: Path = tmp_path_factory.mktemp("scan")
    return (
        Ledger("memory://"),
        Ledger(f"jsonl:///{root / 'logs'}"),
        Ledger(f"sqlite:///{root}/s.db"),
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(messages=st.lists(any_texts, min_size=1, max_size=6), data=st.data())
def test_the_stores_that_scan_find_what_sqlite_finds(
    scanning_and_sqlite: tuple[Ledger, ...], messages: list[str], data: st.DataObject
) -> None:
    """memory:// and jsonl:// match word prefixes by the same rule as the indexes: the same
    hits as SQLite for any text and query, where they once matched raw substrings ("oxes" in
    "Foxes", but not "creme" in "crème")."""
    query = data.draw(
        st.sampled_from(messages).flatmap(
            lambda text: st.tuples(st.integers(0, len(text)), st.integers(1, 12)).map(
                lambda cut: text[cut[0] : cut[0] + cut[1]]
            )
        )
        | st.lists(st.sampled_from(_PIECES + _SEPARATORS), max_size=4).map("".join)
    )
    session = f"s{abs(hash((tuple(messages), query)))}"
    msgs = [Msg.user(text, id=f"m{i}") for i, text in enumerate(messages)]
    for ledger in scanning_and_sqlite:
        ledger.save(session, msgs)
    *scanning, on_sqlite = scanning_and_sqlite
    for ledger in scanning:
        assert _found(ledger, query) == _found(on_sqlite, query), (ledger.store, messages, query)


# -- every store: long words, and the same snippets ---------------------------------------------
_LONG_WORDS = {  # past PostgreSQL's lexeme limit, in one, two and three bytes a character
    "hex": "deadbeef" * 300,
    "cyrillic": "\u0436" * 1100,
    "cut inside a character": "ab" + "\u65e5" * 700,
}


def test_a_word_of_any_length_is_found_by_the_same_queries_on_every_store(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
) -> None:
    """PostgreSQL cannot index a word of 2 KiB or more: such a word was left out of its index,
    so no prefix found the message there, and a query word that long was dropped on every
    store but SQLite. Every store now counts a word's first 2,047 bytes, on both sides."""
    with ledger_on(backend) as ledger:
        ledger.save("s", [Msg.user(f"the dump: {w} ends", id=n) for n, w in _LONG_WORDS.items()])
        for name, word in _LONG_WORDS.items():
            for query in (word[:10], cut_word(word), word, word + "more", f"dump {word} ends"):
                assert [h.msg_id for h in ledger.search(query)] == [name], (backend, query[:12])
            assert ledger.search(word[:10] + "q" + word[10:]) == []


def test_a_snippet_is_the_same_on_every_store(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
) -> None:
    """Every store cuts a hit's snippet from its text by ``snippet_around``: SQLite's FTS5
    ``snippet()`` cut 16 tokens instead, and dropped the NUL characters of the text."""
    texts = {
        "nul": "a\x00b c\x00",
        "long": "x " * 100 + "Un café crème,\nand a fox that jumps" + " y" * 100,
        "tool": "first line\nsecond fox line",
    }
    with ledger_on(backend) as ledger:
        ledger.save("s", [Msg.user(text, id=name) for name, text in texts.items()])
        for query, name in (("b", "nul"), ("CREME", "long"), ('"fox', "long"), ("secon", "tool")):
            hits = [(h.msg_id, h.snippet) for h in ledger.search(query) if h.msg_id == name]
            first = query_words(query)[0]
            assert hits == [(name, snippet_around(texts[name], first))], (backend, query)
