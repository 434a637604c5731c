"""Writing Racelogic VBO text files (the layout is described in :mod:`wrtfd.vbo.reader`).

Standard columns are written in the widths and signs VBOX loggers use (``+2627.79783600``
minutes, ``058.406`` km/h, ``+00331.70`` m), other channels in ``+8.442395E-02`` form; lines
end ``\\r\\n`` as the format asks. Non-finite values (a channel with no sample yet) are written
as 0: VBO has no "missing".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import IO

import numpy as np
import numpy.typing as npt

from wrtfd.vbo.reader import VboChannel, VboGate

__all__ = ["STANDARD", "format_gate", "write_vbo"]


def _minutes(width: int) -> Callable[[float], str]:
    return lambda deg: f"{deg * 60.0:+0{width}.8f}"


def _hhmmss(seconds: float) -> str:
    seconds %= 86400.0
    hh = int(seconds // 3600)
    mm = int(seconds // 60) % 60
    ss = seconds - hh * 3600 - mm * 60
    text = f"{hh:02d}{mm:02d}{ss:06.3f}"
    if ss >= 59.9995:  # rounds up to 60.000: carry, not a 61st second
        return _hhmmss(math.floor(seconds) + 1.0)
    return text


#: The standard channels wrtfd writes: column name -> (title, formatter). Values given in the
#: units of the titles (km/h, degrees, metres, m/s).
STANDARD: dict[str, tuple[str, Callable[[float], str]]] = {
    "sats": ("satellites", lambda v: f"{int(v):03d}"),
    "time": ("time", _hhmmss),
    "lat": ("latitude", _minutes(14)),
    "long": ("longitude", lambda deg: f"{-deg * 60.0:+015.8f}"),  # west positive
    "velocity": ("velocity kmh", lambda v: f"{v:07.3f}"),
    "heading": ("heading", lambda v: f"{v % 360.0:07.3f}"),
    "height": ("height", lambda v: f"{v:+09.2f}"),
    "vert-vel": ("vertical velocity m/s", lambda v: f"{v:+08.2f}"),
}


def _custom(v: float) -> str:
    """``+8.442395E-02`` as VBOX writes, or all 17 digits when 7 would change the value (a
    microsecond time, a counter past ten million): the file keeps what was recorded."""
    text = f"{v:+.6E}"
    return text if float(text) == v else f"{v:+.16E}"


def format_gate(gate: VboGate) -> str:
    """A ``[laptiming]`` line: kind, the gate's point and the point behind it (minutes, west +)."""

    def point(lat: float, lon: float) -> str:
        return f"{-lon * 60.0:+.6f} {lat * 60.0:+.6f}"

    return (
        f"{gate.kind:<12} {point(gate.lat_deg, gate.lon_deg)} "
        f"{point(gate.behind_lat_deg, gate.behind_lon_deg)} ¬ {gate.name}"
    )


def write_vbo(
    out: IO[str],
    *,
    created: datetime,
    columns: Mapping[str, npt.NDArray[np.float64]],
    custom: Sequence[VboChannel] = (),
    gates: Sequence[VboGate] = (),
    comments: Sequence[str] = (),
) -> int:
    """Write a VBO file to ``out`` (a text stream opened with ``newline=""``).

    ``columns`` holds the standard columns (keys of :data:`STANDARD`, in its units; ``long``
    east-positive degrees, converted here) and one array per ``custom`` channel, all of the
    same length. Returns the number of data lines.

    :raises ValueError: columns of different lengths, or a custom column name with a space.
    """
    standard = [name for name in STANDARD if name in columns]
    names = standard + [ch.column for ch in custom]
    lengths = {len(columns[n]) for n in names}
    if len(lengths) > 1:
        raise ValueError(f"columns of different lengths: {sorted(lengths)}")
    for ch in custom:
        if not ch.column or any(c.isspace() for c in ch.column) or ch.column in STANDARD:
            raise ValueError(f"column name {ch.column!r}: one word, not a standard column's")
    nl = "\r\n"
    head = [f"File created on {created:%d/%m/%Y} @ {created:%H:%M:%S}", "", "[header]"]
    head += [STANDARD[n][0] for n in standard] + [ch.title for ch in custom]
    head += ["", "[channel units]", *(ch.unit or "(null)" for ch in custom)]
    head += ["", "[comments]", *comments]
    if gates:
        head += ["", "[laptiming]", *(format_gate(g) for g in gates)]
    head += ["", "[column names]", " ".join(names), "", "[data]"]
    out.write(nl.join(head) + nl)
    formats = [STANDARD[n][1] for n in standard] + [_custom] * len(custom)
    data = [
        np.nan_to_num(np.asarray(columns[n], dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
        for n in names
    ]
    count = len(data[0]) if data else 0
    for i in range(count):
        out.write(" ".join(f(float(col[i])) for f, col in zip(formats, data, strict=True)) + nl)
    return count
