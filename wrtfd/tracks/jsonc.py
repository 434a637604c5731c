"""JSON with C comments (``/* ... */`` and ``// ...``), the syntax of track files.

Comments are blanked out rather than removed, keeping every newline and column, so a JSON error
still points at the right line of the original file. Strings are honoured: a ``//`` inside
``"http://..."`` is text, not a comment.
"""

from __future__ import annotations

import json
from typing import Any

from wrtfd.errors import TrackError

__all__ = ["MAX_TEXT_CHARS", "loads", "strip_comments"]

#: Track files are small (the real oval has 50 vertices); refuse absurd inputs before parsing.
MAX_TEXT_CHARS = 16 * 1024 * 1024


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def strip_comments(text: str) -> str:
    """Return ``text`` with comments replaced by spaces (newlines kept).

    :raises TrackError: for a block comment that never ends.
    """
    out: list[str] = []
    i = 0
    n = len(text)
    start = 0  # start of the pending verbatim run
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\":
                    i += 1
                elif text[i] == "\n":
                    break  # json.loads reports the unterminated string at the right place
                i += 1
            i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] in "/*":
            out.append(text[start:i])
            if text[i + 1] == "/":
                end = text.find("\n", i)
                end = n if end < 0 else end
                out.append(" " * (end - i))
            else:
                close = text.find("*/", i + 2)
                if close < 0:
                    line, col = _line_col(text, i)
                    raise TrackError(f"line {line} column {col}: block comment '/*' is never closed")
                end = close + 2
                # Keep line structure: every newline survives, everything else becomes a space.
                out.append("".join("\n" if ch == "\n" else " " for ch in text[i:end]))
            i = end
            start = i
            continue
        i += 1
    out.append(text[start:])
    return "".join(out)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise TrackError(f"duplicate key {key!r} in one object")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise TrackError(f"{name} is not a number in JSON")


def loads(text: str) -> Any:
    """Parse JSON-with-comments text.

    :raises TrackError: with line and column for any syntax error, duplicate keys, NaN/Infinity.
    """
    if len(text) > MAX_TEXT_CHARS:
        raise TrackError(f"track text is {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
    plain = strip_comments(text)
    try:
        return json.loads(plain, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise TrackError(f"line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise TrackError("JSON nesting is too deep") from None
