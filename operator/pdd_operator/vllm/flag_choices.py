"""Flag values vLLM's argument parser takes as ``choices``, by release.

vllm/engine/arg_utils.py builds each flag from its config field's type hint; a ``Literal`` becomes argparse
``choices`` (``literal_to_kwargs``: ``choices`` unless the hint also admits ``str``, then only a ``metavar``; 0.9.0
onwards), so a value the release's Literal does not list stops the server while its arguments are parsed
("argument --flag: invalid choice", exit 2). The values of such a Literal come and go between releases; a guide
written for one release copied onto another image then fails before any engine starts.

Read here, per release, in the sdists 0.9.0, 0.9.1, 0.9.2, 0.10.0, 0.10.1.1, 0.10.2, 0.11.0, 0.11.1, 0.11.2, 0.12.0,
0.13.0, 0.14.0, 0.14.1, 0.18.0, 0.18.1, 0.19.0, 0.19.1, 0.20.0, 0.20.1, 0.20.2, 0.21.0, 0.22.0, 0.26.0, 0.27.0,
0.27.1, 0.28.0-0.34.0:

- ``--prefix-caching-hash-algo``: ``CacheConfig.prefix_caching_hash_algo: PrefixCachingHashAlgo`` (vllm/config.py up
  to 0.10.0, line 1392 in 0.9.0 and 1610 in 0.10.0; vllm/config/cache.py from 0.10.1.1, line 27 in 0.10.1.1 and
  0.10.2, 28 in 0.11.0, 33 in 0.12.0/0.13.0, 177 in 0.34.0), a plain Literal in every release read (choices).
  ``builtin`` (Python's hash) and ``sha256_cbor_64bit`` end with 0.10.1.1: 0.10.2 has ``sha256`` and
  ``sha256_cbor`` only; 0.13.0 adds ``xxhash`` and ``xxhash_cbor``.

``--kv-cache-dtype`` is not listed: its hint became ``CacheDType | str`` (0.34.0 vllm/config/cache.py line 245), a
``metavar`` without ``choices``, so its parser no longer refuses a value by itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdd_operator.vllm.versions import Version, fmt


@dataclass(frozen=True)
class ChoiceTable:
    """The values one Literal-typed flag accepts across the releases read.

    Attributes:
        flag: the long flag (``--prefix-caching-hash-algo``).
        literal: the type alias vLLM names it by (``PrefixCachingHashAlgo``), for messages.
        read: the releases read, oldest first.
        values: value -> (first release read that accepts it, last release read that accepts it); no value left a
            gap between the two.
    """

    flag: str
    literal: str
    read: tuple[Version, ...]
    values: dict[str, tuple[Version, Version]]

    def accepts(self, value: str, release: Version) -> bool:
        """Whether the parser of ``release`` (one of :attr:`read`) lists ``value``."""
        span = self.values.get(value)
        return span is not None and span[0] <= release <= span[1]

    def history(self, value: str) -> str:
        """Which releases read accept ``value``, in words."""
        span = self.values.get(value)
        if span is None:
            return f"no release read ({fmt(self.read[0])} to {fmt(self.read[-1])}) lists it"
        first, last = span
        text = f"{fmt(first)} to {fmt(last)} list it" if last < self.read[-1] else f"releases from {fmt(first)} list it"
        if last < self.read[-1]:
            text += f"; {fmt(self.read[self.read.index(last) + 1])} dropped it"
        return text


_READ: tuple[Version, ...] = (
    (0, 9, 0), (0, 9, 1), (0, 9, 2), (0, 10, 0), (0, 10, 1, 1), (0, 10, 2), (0, 11, 0), (0, 11, 1), (0, 11, 2),
    (0, 12, 0), (0, 13, 0), (0, 14, 0), (0, 14, 1), (0, 18, 0), (0, 18, 1), (0, 19, 0), (0, 19, 1), (0, 20, 0),
    (0, 20, 1), (0, 20, 2), (0, 21, 0), (0, 22, 0), (0, 26, 0), (0, 27, 0), (0, 27, 1), (0, 28, 0), (0, 29, 0),
    (0, 30, 0), (0, 31, 0), (0, 32, 0), (0, 33, 0), (0, 34, 0))

#: ``--prefix-caching-hash-algo`` (see the module docstring for the lines read).
PREFIX_CACHING_HASH_ALGO = ChoiceTable(
    flag="--prefix-caching-hash-algo",
    literal="PrefixCachingHashAlgo",
    read=_READ,
    values={
        "builtin": ((0, 9, 0), (0, 10, 1, 1)),
        "sha256": ((0, 9, 0), (0, 34, 0)),
        "sha256_cbor_64bit": ((0, 10, 0), (0, 10, 1, 1)),
        "sha256_cbor": ((0, 10, 2), (0, 34, 0)),
        "xxhash": ((0, 13, 0), (0, 34, 0)),
        "xxhash_cbor": ((0, 13, 0), (0, 34, 0)),
    },
)

#: The flags judged here, by flag.
CHOICE_TABLES: dict[str, ChoiceTable] = {t.flag: t for t in (PREFIX_CACHING_HASH_ALGO,)}


@dataclass(frozen=True)
class ChoiceRefusal:
    """A flag value the parser of an engine's release refuses, or may refuse.

    Attributes:
        flag: the flag; value: the value given.
        verdict: ``"error"`` (the releases read settle it), ``"warning"`` (the version lies between releases read
            that disagree, or after the newest for a value no release read lists), ``"not-checked"`` (the version is
            unknown and some releases read accept the value while others refuse it).
        why: which releases accept it, in words.
    """

    flag: str
    value: str
    verdict: str
    why: str


def refusal(table: ChoiceTable, value: str, version: Version | None,
            floor: Version | None = None) -> ChoiceRefusal | None:
    """Whether the parser of vLLM ``version`` refuses ``value`` for ``table``'s flag; ``None`` where it accepts it
    (or where nothing read bounds it: before the oldest release read).

    ``version`` ``None``: the version is unknown; ``floor`` (optional) is the oldest release it may be (a development
    build's line). The release read with the same ``major.minor.patch`` decides (0.10.1 as 0.10.1.1); a release not read
    between two read ones that agree is decided as they are, a warning where they disagree; after the newest release
    read a value dropped stays refused, one never listed is a warning (a later release may add it).
    Pure; raises nothing."""
    why = table.history(value)
    if version is None:
        releases = [r for r in table.read if floor is None or r >= floor] or [table.read[-1]]
        accepted = [r for r in releases if table.accepts(value, r)]
        if len(accepted) == len(releases):
            return None
        return ChoiceRefusal(table.flag, value, "error" if not accepted else "not-checked", why)
    if version < table.read[0][:3]:
        return None
    same = [r for r in table.read if r[:3] == version[:3]]
    if same:
        accepted = [r for r in same if table.accepts(value, r)]
        if len(accepted) == len(same):
            return None
        return ChoiceRefusal(table.flag, value, "warning" if accepted else "error", why)
    if version > table.read[-1][:3]:
        if table.accepts(value, table.read[-1]):
            return None
        return ChoiceRefusal(table.flag, value, "error" if value in table.values else "warning", why)
    before = max(r for r in table.read if r[:3] < version[:3])
    after = min(r for r in table.read if r[:3] > version[:3])
    ok_before, ok_after = table.accepts(value, before), table.accepts(value, after)
    if ok_before and ok_after:
        return None
    return ChoiceRefusal(table.flag, value, "error" if not (ok_before or ok_after) else "warning", why)
