"""Shared helpers for reading benchmark files: JSON Lines rows and bfcl-style function schemas.

BFCL-v3 and ACEBench both describe tools in a pseudo-JSON-schema ("dict", "float", "tuple", "list");
chat templates and validators expect standard JSON schema, so both sources convert through here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from environments.base import SourceDataError

# bfcl-style type name -> JSON-schema type (None: drop the type, any value is allowed).
_JSON_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "any": None}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON Lines file; a bad line raises SourceDataError naming file and line."""
    if not path.is_file():
        raise SourceDataError(f"{path}: file not found")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SourceDataError(f"{path} line {line_no}: invalid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise SourceDataError(f"{path} line {line_no}: expected an object, got {type(row).__name__}")
            rows.append(row)
    return rows


def bfcl_to_json_schema(bfcl_schema: Any) -> Any:
    """bfcl's pseudo-JSON-schema ('dict', 'float', 'tuple', 'list') -> standard JSON schema."""
    if isinstance(bfcl_schema, list):
        return [bfcl_to_json_schema(v) for v in bfcl_schema]
    if not isinstance(bfcl_schema, dict):
        return bfcl_schema
    out = {}
    for key, value in bfcl_schema.items():
        if key == "type" and isinstance(value, str):
            mapped = _JSON_TYPES.get(value, value)
            if mapped is not None:
                out[key] = mapped
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: bfcl_to_json_schema(prop) for name, prop in value.items()}
        else:
            out[key] = bfcl_to_json_schema(value)
    return out
