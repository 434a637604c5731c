"""Write the effective config back as TOML (``wrtfd config show``).

Only the shapes a :class:`~wrtfd.daemon.config.Config` dump has: tables, arrays of tables,
strings, numbers, booleans and arrays of scalars. ``None`` (unset optional keys) has no TOML
form, so such keys are written as comments, which keeps every key visible.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _string(text: str) -> str:
    """A TOML basic string: escape quote, backslash and control characters; keep the rest as is."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)  # (fullmatch: "$" allows a final "\n")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if math.isnan(value):
            return "nan"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None)
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _table(lines: list[str], prefix: str, data: Mapping[str, Any], *, array: bool = False) -> None:
    if prefix:
        lines.append(f"[[{prefix}]]" if array else f"[{prefix}]")
    nested: list[tuple[str, Any]] = []
    for key, value in data.items():
        if value is None:
            lines.append(f"# {_key(key)} = (unset)")
        elif (isinstance(value, Mapping) and value) or _is_table_array(value):
            nested.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in nested:
        name = f"{prefix}.{_key(key)}" if prefix else _key(key)
        lines.append("")
        if _is_table_array(value):
            for i, item in enumerate(value):
                if i:
                    lines.append("")
                _table(lines, name, item, array=True)
        else:
            _table(lines, name, value)


def dumps(data: Mapping[str, Any]) -> str:
    """TOML text for ``data`` (a JSON-mode pydantic dump)."""
    lines: list[str] = []
    scalars = {k: v for k, v in data.items() if not isinstance(v, Mapping) and not _is_table_array(v)}
    tables = {k: v for k, v in data.items() if k not in scalars}
    _table(lines, "", scalars)
    for key, value in tables.items():
        if lines:
            lines.append("")
        if _is_table_array(value):
            for i, item in enumerate(value):
                if i:
                    lines.append("")
                _table(lines, _key(key), item, array=True)
        else:
            _table(lines, _key(key), value)
    return "\n".join(lines).strip("\n") + "\n"
