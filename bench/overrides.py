"""Command-line config overrides shared by the bench scripts: ``key=value`` and ``LABEL:field=value[,...]``,
and the schedulers a run with late rewards (``--observe-lag``) leaves out.

Values are JSON (``true``, ``0.5``, ``"variance"``). A variant's label is everything before the ':' that
precedes its first '=', so a label may itself hold ':' (the suite's ``es:...`` rows).
"""

from __future__ import annotations

import dataclasses
import json

from envsched_core.schedulers import refilling_schedulers


def key_value(item: str) -> tuple[str, object]:
    """``key=value`` -> (key, the JSON value)."""
    key, sep, value = item.partition("=")
    if not sep:
        raise SystemExit(f"{item!r}: expected key=value")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        raise SystemExit(f'{item!r}: the value must be JSON (true, 0.5, "variance"), got {value!r}') from None


def field_overrides(
    items: list[str], config_cls: type, flag: str = "--set", reserved: dict[str, str] | None = None
) -> dict[str, object]:
    """``flag`` items (``field=value``) -> {field: JSON value}, each a field of the dataclass ``config_cls``.
    ``reserved``: {field: where the script sets it}, fields the script passes itself, refused here."""
    overrides = dict(key_value(item) for item in items)
    unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(config_cls)})
    if unknown:
        raise SystemExit(f"{flag}: {config_cls.__name__} has no field(s) {unknown}")
    clash = sorted(set(overrides) & set(reserved or {}))
    if clash:
        raise SystemExit(f"{flag}: {clash[0]} is set by {reserved[clash[0]]} here")
    return overrides


def parse_variant(item: str, taken) -> tuple[str, dict]:
    """``LABEL:field=value[,field=value]`` -> (LABEL, config overrides); LABEL must not be in ``taken`` (the
    script's own scheduler names)."""
    head, eq, _ = item.partition("=")
    label, sep, _ = head.rpartition(":")
    if not eq or not sep or not label:
        raise SystemExit(f"--variant {item!r}: expected LABEL:field=value[,field=value]")
    if label in taken:
        raise SystemExit(f"--variant {item!r}: {label!r} is already a scheduler name")
    return label, dict(key_value(part) for part in item[len(label) + 1 :].split(",") if part)


def without_refilling(names: list[str], observe_lag: int) -> list[str]:
    """``names`` less DAPO and GRESO when rewards arrive ``observe_lag`` > 0 steps late: they refill a step
    after reading its rewards, which a lagging trainer cannot give them. Says what it left out."""
    refilling = refilling_schedulers(names) if observe_lag else []
    if refilling:
        print(f"--observe-lag {observe_lag}: left out {refilling} (they refill after reading rewards)")
    return [n for n in names if n not in refilling]
