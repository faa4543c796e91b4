"""The words a message is found by, on every store: cut in Python for PostgreSQL's full-text
index, matched in Python by the stores that scan (``has_words``: memory, JSONL), and found again
in a hit's text for its snippet (``first_word_at``).

A word is a run of letters and digits, lowercased, with Latin diacritics removed: the rule of
SQLite FTS5's ``unicode61 remove_diacritics 2`` tokenizer, which the SQLite store uses, so a
query finds the same messages on every store. A query matches a message when each of its words
is a prefix of one of the message's words.

A word longer than PostgreSQL indexes (a lexeme of 2 KiB or more is refused) counts for its
first 2,047 bytes of UTF-8, cut on a character boundary (``cut_word``): the index holds each
message word so cut, and every store cuts each query word so. Nothing is lost by the cut: a
query word of at most 2,047 bytes starts a message word exactly when it starts that word's cut,
so the stores that match whole words (SQLite's FTS5, the scans) find what PostgreSQL finds, and
a query word past the limit finds the messages its first 2,047 bytes find.

Why the client cuts the words: PostgreSQL's ``to_tsvector`` parser costs about 0.1 ms of
server CPU per kilobyte of text, and an index over it runs inside every commit: 0.4 ms of an
append of a typical turn, on a server every worker shares. Splitting the same text in the
client costs about 60 µs for such a turn, and the server then only reads a ``tsvector``
literal (``tsvector_literal``) that needs no parsing beyond its spaces.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left

__all__ = [
    "MAX_INDEXED_CHARS",
    "MAX_WORD_BYTES",
    "cut_word",
    "first_word_at",
    "has_words",
    "prefix_query",
    "query_words",
    "tsvector_literal",
    "words",
]

#: Text past this many characters of a message is not indexed (as before: ``left(text, n)``).
MAX_INDEXED_CHARS = 100_000
#: The bytes of a word that count (``cut_word``): PostgreSQL refuses a lexeme of 2 KiB or more.
MAX_WORD_BYTES = 2047

_WORD = re.compile(r"[^\W_]+")  # letters and digits: \w without the underscore
#: For ASCII text, the same split at C speed (a sixth of the regular expression's time):
#: every byte but a letter or digit becomes a space.
_ASCII_SPACES = bytes(b if chr(b).isascii() and chr(b).isalnum() else 32 for b in range(256))
#: The characters of an ASCII word, lowercased (``_ascii_word_at``).
_ASCII_WORD_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")

#: What ``first_word_at`` cuts a text into before it cuts each piece as ``words`` does: runs of
#: letters, digits and the combining marks ``words`` may join to a letter, so that no piece
#: ends inside a word ``words`` would make of the whole text.
_TOKEN = re.compile("(?:[^\\W_]|[\u0300-\u036f])+")

#: The diacritics ``remove_diacritics`` strips: combining marks on a Latin letter (Greek and
#: other scripts keep theirs, as in unicode61).
_LATIN_MARKS = re.compile("(?<=[a-z])[\u0300-\u036f]+")


def words(text: str) -> list[str]:
    """The words of ``text`` (its first ``MAX_INDEXED_CHARS`` characters), in order, repeated
    as often as they occur: ``words("Café-au-lait, x_2") == ["cafe", "au", "lait", "x", "2"]``.

    Used for queries on both SQL stores, and for PostgreSQL's index; SQLite's FTS5 cuts the
    text it indexes by the same rule."""
    text = text[:MAX_INDEXED_CHARS]
    if text.isascii():
        return text.lower().encode().translate(_ASCII_SPACES).decode().split()
    # "é" as "e" and a combining acute, which goes; what else decomposed (a Greek tonos, an
    # Arabic madda) is composed again, since a mark left alone would split its word
    text = _LATIN_MARKS.sub("", unicodedata.normalize("NFD", text).lower())
    return _WORD.findall(unicodedata.normalize("NFC", text))


def cut_word(word: str) -> str:
    """``word``'s first ``MAX_WORD_BYTES`` bytes of UTF-8, cut on a character boundary: the
    part of a word that counts (see the module docstring). Most words are far shorter."""
    if len(word) * 4 <= MAX_WORD_BYTES:  # short enough in any encoding: no bytes to count
        return word
    return word.encode()[:MAX_WORD_BYTES].decode(errors="ignore")  # drops a character cut in two


def tsvector_literal(text: str) -> str | None:
    """``text``'s distinct words as a PostgreSQL ``tsvector`` literal (None: it has no word).

    A word holds only letters and digits, so it needs no quoting: the literal is the words
    separated by spaces, each cut to what PostgreSQL can index (``cut_word``)."""
    distinct = set(words(text))
    if not distinct:
        return None
    if any(len(w) * 4 > MAX_WORD_BYTES for w in distinct):
        distinct = set(map(cut_word, distinct))
    return " ".join(distinct)


def query_words(query: str) -> list[str]:
    """The words a search for ``query`` looks for, each once, in order (none: it finds
    nothing). Operators and quotes in ``query`` are never syntax: they are not letters or
    digits. Each is cut as ``cut_word`` cuts, on every store alike."""
    return list(dict.fromkeys(map(cut_word, words(query))))


def prefix_query(query: str) -> str | None:
    """A ``tsquery`` literal matching messages that hold every word of ``query`` as a word
    prefix (``"fox dog"`` → ``"fox:* & dog:*"``); None when ``query`` has no word."""
    return " & ".join(f"{w}:*" for w in query_words(query)) or None


def has_words(text: str, wanted: list[str]) -> bool:
    """Whether each of ``wanted`` (``query_words``) is a prefix of a word of ``text``: the match
    of the stores that scan their messages (memory, JSONL), the one the indexes of SQLite and
    PostgreSQL make."""
    text = text[:MAX_INDEXED_CHARS]
    if text.isascii():  # no word to cut: each is looked for with ``str.find``
        lowered = text.lower()
        return all(_ascii_word_at(lowered, word) >= 0 for word in wanted)
    found = sorted(set(words(text)))
    for word in wanted:
        at = bisect_left(found, word)
        if at == len(found) or not found[at].startswith(word):
            return False
    return True


def _ascii_word_at(lowered: str, prefix: str) -> int:
    """``first_word_at`` for ASCII text, given lowercased (the same offsets), whose words are
    runs of ASCII letters and digits: the first ``prefix`` no letter or digit comes right
    before. Lowering and ``str.find`` took 2 us on a 1.6 KB text without the word, a
    case-blind regular expression with that look-behind 29 us."""
    if not prefix.isascii():  # no word of ASCII text holds it
        return -1
    at = lowered.find(prefix)
    while at > 0 and lowered[at - 1] in _ASCII_WORD_CHARS:  # inside a word: look further
        at = lowered.find(prefix, at + 1)
    return at


def first_word_at(text: str, prefix: str) -> int:
    """Where in ``text`` the first word that starts with ``prefix`` (a word as ``words`` gives
    it) begins, or -1: what a search hit's snippet is centred on, so that ``"cafe"`` finds it
    at ``"Café"`` and ``'"fox'`` at ``"fox"``, as the search itself does."""
    text = text[:MAX_INDEXED_CHARS]
    if not prefix:
        return -1
    if text.isascii():
        return _ascii_word_at(text.lower(), prefix)
    for match in _TOKEN.finditer(text):
        if any(word.startswith(prefix) for word in words(match.group())):
            return match.start()
    return -1
