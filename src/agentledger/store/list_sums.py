"""What each list holds at a version, in a few bytes, so a load can prove it found those rows.

A message body proves its own content (it is checked against its digest), but nothing in a row
says that it is the row the load should have found: a damaged index entry can hide a row, or
point at another version's row at the same position, and the result still decodes; and the id
a loaded message shows comes from its row, before any body is decoded. So every commit records,
per list, ``(length, digests, ids)``: the number of live messages, the sum of their digests (as
128-bit integers) and the sum of the CRC-32 of their ids followed by their ranks (see
``ranks``), both modulo 2**128.

A commit updates the sums from the rows it closes and puts, at the cost of the change; a load
recomputes them from what it found (about 2 ms for 12,000 messages) and raises
``CorruptStoreError`` when they differ. A missing, extra or substituted row changes the digest
sum, a changed id or rank the id sum (CRC-32 catches every change of up to four bytes), and rows
read out of rank order are caught by the loader. A reader without ids (``read_head``) checks the
rest. Versions committed before ranks existed have sums of the ids alone (``Row`` without a
rank), which ``apply`` and ``check`` take when no ranks are given.

The session's named values are one more entry, under ``VALUES`` (a name no list can have): the
count, the sum of the values' digests and of the CRC-32 of their names.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence

from agentledger.errors import CorruptStoreError

__all__ = [
    "VALUES",
    "Row",
    "Sums",
    "apply",
    "apply_values",
    "check",
    "of",
    "pack",
    "recount",
    "unpack",
]

#: list name -> (length, sum of digests, sum of id checksums)
Sums = dict[str, tuple[int, int, int]]
#: ``(digest, msg_id, rank)`` of one message row, or ``(digest, name)`` of a value
Row = tuple[bytes, str, bytes] | tuple[bytes, str]
#: The entry that sums the session's values (list names are never empty).
VALUES = ""

_MOD = 1 << 128
_DIGEST = 16
_HEAD = struct.Struct(">II")  # name length in bytes, list length
_SUMS = 32  # two 16-byte sums


def _digests(digests: Iterable[bytes]) -> int:
    return sum(map(int.from_bytes, digests)) % _MOD


def _ids(ids: Iterable[str], ranks: Iterable[bytes] | None = None) -> int:
    """The sum of the CRC-32 of each id, continued over its rank when ranks are given."""
    crcs = map(zlib.crc32, map(str.encode, ids))
    if ranks is not None:
        crcs = map(zlib.crc32, ranks, crcs)
    return sum(crcs) % _MOD


def _row_ids(rows: Sequence[Row]) -> int:
    ranked = bool(rows) and len(rows[0]) == 3
    return _ids([r[1] for r in rows], [r[2] for r in rows] if ranked else None)  # type: ignore[misc]


def of(
    lists: Mapping[str, tuple[Sequence[bytes], Sequence[str], Sequence[bytes] | None]],
) -> Sums:
    """The sums of lists given as ``(digests, ids, ranks)`` (empty lists are left out)."""
    return {
        name: (len(digests), _digests(digests), _ids(ids, ranks))
        for name, (digests, ids, ranks) in lists.items()
        if digests
    }


def apply(
    sums: Sums,
    name: str,
    before: int,
    closed: Sequence[Row],
    put: Sequence[Row],
    after: int,
    where: str,
) -> None:
    """Update ``sums`` for one list written by a commit: it had ``before`` live messages; the
    rows ``closed`` left it, ``put`` joined it, and it now has ``after``."""
    length, digests, ids = sums.get(name, (0, 0, 0))
    if length != before:
        raise CorruptStoreError(
            f"{where}/{name}: {before} live messages found, {length} committed", location=where
        )
    if not after:
        sums.pop(name, None)
        return
    digests += _digests(r[0] for r in put) - _digests(r[0] for r in closed)
    ids += _row_ids(put) - _row_ids(closed)
    sums[name] = (after, digests % _MOD, ids % _MOD)


def recount(sums: Sums, name: str, rows: Sequence[Row]) -> None:
    """Set the sums of list ``name`` to those of ``rows``, every row it now holds."""
    if rows:
        digests = [r[0] for r in rows]
        sums[name] = (len(rows), _digests(digests), _row_ids(rows))
    else:
        sums.pop(name, None)


def apply_values(sums: Sums, closed: Sequence[Row], put: Sequence[Row]) -> None:
    """Update the ``VALUES`` entry for the values a commit closed and put."""
    count, digests, names = sums.get(VALUES, (0, 0, 0))
    count += len(put) - len(closed)
    digests += _digests(r[0] for r in put) - _digests(r[0] for r in closed)
    names += _row_ids(put) - _row_ids(closed)
    if count:
        sums[VALUES] = (count, digests % _MOD, names % _MOD)
    else:
        sums.pop(VALUES, None)


def check(
    found: Mapping[str, tuple[Sequence[bytes], Sequence[str] | None, Sequence[bytes] | None]],
    expected: Sums,
    where: str,
) -> None:
    """Raise ``CorruptStoreError`` unless the lists ``found`` (name -> ``(digests, ids,
    ranks)``, ids None where not read, ranks None for sums of ids alone) have the ``expected``
    sums. Errors name the list."""
    for name in sorted({*found, *expected}):
        digests, ids, ranks = found.get(name, ((), (), None))
        length, digest_sum, id_sum = expected.get(name, (0, 0, 0))
        try:
            if (len(digests), _digests(digests)) == (length, digest_sum) and (
                ids is None or _ids(ids, ranks) == id_sum
            ):
                continue
        except TypeError:  # a digest that is not bytes, an id that is not text
            pass
        location = f"{where}/{name}"
        if any(type(d) is not bytes or len(d) != _DIGEST for d in digests) or any(
            type(i) is not str or not i for i in ids or ()
        ):
            raise CorruptStoreError(
                f"{location} holds a malformed row (an id or digest of the wrong type or size)",
                location=location,
            )
        raise CorruptStoreError(
            f"{location}: the message rows found are not the ones committed (their count, "
            "digests or ids differ from what the commit recorded)",
            location=location,
        )


def pack(sums: Sums) -> bytes:
    out = bytearray()
    for name in sorted(sums):
        length, digests, ids = sums[name]
        raw = name.encode()
        out += _HEAD.pack(len(raw), length) + raw
        out += digests.to_bytes(16, "big") + ids.to_bytes(16, "big")
    return bytes(out)


def unpack(blob: bytes, where: str) -> Sums:
    sums: Sums = {}
    at = 0
    try:
        while at < len(blob):
            size, length = _HEAD.unpack_from(blob, at)
            at += _HEAD.size
            name = blob[at : at + size].decode()
            values = blob[at + size : at + size + _SUMS]
            at += size + _SUMS
            if len(values) != _SUMS or name in sums:
                raise ValueError("truncated or repeated entry")
            sums[name] = (length, int.from_bytes(values[:16]), int.from_bytes(values[16:]))
    except (struct.error, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise CorruptStoreError(
            f"{where}: the recorded list sums cannot be read ({exc})", location=where
        ) from None
    return sums
