"""A domain's database with copy-on-write rollouts, a stable digest and a record-level diff.

The tables (e.g. ``users``, ``orders``, ``products``) are loaded once per source into a
:class:`BaseTables`, which is never mutated. Each rollout gets a :class:`Database`: a shallow copy of
every table (tens of microseconds, where a deep copy of the airline data takes ~0.2 s) whose records
are shared with the base until a tool asks to change one (``edit``), which copies that record first.
Tools must therefore read through ``get`` and write only through ``edit`` / ``insert``.

Equality is what tau-bench's reward needs: two databases are equal when their digests are equal. The
digest is the base's digest (every record, hashed once) plus the records whose content differs from the
base's, so a rollout's digest costs a pass over the records it touched, not over the whole database
(a pass over every key was 60% of a tau-bench skill-policy campaign's time).
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

Record = dict[str, Any]


def record_hash(record: Any) -> str:
    payload = json.dumps(record, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


class BaseTables:
    """The immutable starting state of a domain, with each record's hash computed once."""

    def __init__(self, tables: dict[str, dict[str, Record]]):
        self.tables = tables
        self._hashes: dict[str, dict[str, str]] | None = None
        self._digest: str | None = None

    def digest(self) -> str:
        """Hash of every record of the base, computed once."""
        if self._digest is None:
            h = hashlib.sha256()
            for name, table in sorted(self.hashes().items()):
                for key in sorted(table):
                    h.update(f"{name}\x1f{key}\x1f{table[key]}\x1e".encode())
            self._digest = h.hexdigest()
        return self._digest

    def hashes(self) -> dict[str, dict[str, str]]:
        if self._hashes is None:  # lazily: loading the catalogue does not need them
            self._hashes = {
                name: {key: record_hash(rec) for key, rec in table.items()}
                for name, table in self.tables.items()
            }
        return self._hashes

    def fresh(self) -> Database:
        return Database(self)


class Database:
    """One rollout's private view of a domain's tables (copy-on-write over :class:`BaseTables`)."""

    def __init__(self, base: BaseTables):
        self._base = base
        self.tables: dict[str, dict[str, Record]] = {name: dict(t) for name, t in base.tables.items()}
        self._owned: set[tuple[str, str]] = set()  # records this rollout copied or created

    def get(self, table: str, key: str) -> Record | None:
        """A record to read (do not mutate it: it may be shared with the base)."""
        if not isinstance(key, str):
            return None
        return self.tables[table].get(key)

    def edit(self, table: str, key: str) -> Record:
        """The record ``key`` made private to this rollout, ready to be changed in place."""
        if (table, key) not in self._owned:
            self.tables[table][key] = copy.deepcopy(self.tables[table][key])
            self._owned.add((table, key))
        return self.tables[table][key]

    def insert(self, table: str, key: str, record: Record) -> None:
        self.tables[table][key] = record
        self._owned.add((table, key))

    def touched(self) -> set[tuple[str, str]]:
        return set(self._owned)

    def digest(self) -> str:
        """Stable hash of the whole database: equal digests <=> equal contents. A record that was never
        edited is the base's, and one edited back to its base value hashes as the base's, so only the
        records that differ from the base enter, after the base's own digest."""
        base_hashes = self._base.hashes()
        h = hashlib.sha256(self._base.digest().encode())
        for name, key in sorted(self._owned):
            own = record_hash(self.tables[name][key])
            if own != base_hashes[name].get(key):
                h.update(f"{name}\x1f{key}\x1f{own}\x1e".encode())
        return h.hexdigest()[:32]

    def diff(self, other: Database, limit: int = 5) -> list[str]:
        """Where this database differs from ``other`` (same base), one ``table/key: path=value (gold
        value)`` line per differing record, at most ``limit`` lines (then ``...``)."""
        out = []
        for name, key in sorted(self._owned | other._owned):
            mine, theirs = self.tables[name].get(key), other.tables[name].get(key)
            if mine == theirs:
                continue
            if len(out) == limit:
                out.append("...")
                break
            if mine is None or theirs is None:
                out.append(f"{name}/{key}: {'missing' if mine is None else 'unexpected'} record")
            else:
                leaves = [
                    f"{path}={_short(a)} (gold {_short(b)})" for path, a, b in _leaf_diffs(mine, theirs, "")
                ]
                out.append(
                    f"{name}/{key}: " + ", ".join(leaves[:limit] + (["..."] if len(leaves) > limit else []))
                )
        return out


def _leaf_diffs(a: Any, b: Any, path: str):
    """The innermost differing values of two JSON-like values, with dotted paths."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                yield from _leaf_diffs(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                yield from _leaf_diffs(x, y, f"{path}[{i}]")
    else:
        yield path, a, b


def _short(value: Any, width: int = 80) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."
