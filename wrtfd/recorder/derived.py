"""The plug-in point for derived channels (lap number, lap time, sector, ... computed per frame).

A plug-in is any object with the attributes and methods of :class:`DerivedChannels`. The
recorder adds its frame fields to the file's definition as a struct field named ``name``
(``laps.lap_number``) and its footer fields as a struct named ``name`` in the session footer.

Life cycle, for every session (the calls are made on the recorder's thread, in order):

1. ``start_session()`` when a session starts (ticks restart at 0);
2. ``compute(row, time_s)`` for every frame, in tick order, before the frame is written.
   ``row`` is the frame record (``np.void`` of the file's frame dtype): read the sources'
   fields (``row["gps"]["lat_deg"]``), write your own (``row[name]["lap_number"] = 3``).
   ``time_s`` is the frame's session time (tick / rate). Float source channels are NaN while
   stale. Your fields start at zero in every frame: write all of them each time;
3. ``summary()`` when the session ends: a mapping of your footer field names to values.

Optionally, a ``metadata`` mapping (str to str) is added to the file's metadata, before the
policy's and the caller's (which win): the lap channels record their timing sectors there.

``compute`` must be cheap (it runs for every frame on the recorder's path) and must not raise;
an exception is counted (``derived_errors`` in the stats) and the frame is written as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["DerivedChannels"]


@runtime_checkable
class DerivedChannels(Protocol):
    """Channels computed from the other channels of each frame."""

    #: Field name of the plug-in's struct in the frame and in the session footer.
    name: str
    #: Frame fields (and custom types) to add: ``{"fields": [...], "types": {...}}`` in the
    #: format of a WRTF definition (a full definition with ``frame.fields`` works too).
    definition: Mapping[str, Any]
    #: Extra session-footer fields: ``{"best_lap_ms": "uint32", ...}`` or a list of field dicts.
    footer_fields: Mapping[str, Any]

    def start_session(self) -> None: ...

    def compute(self, row: np.void, time_s: float) -> None: ...

    def summary(self) -> Mapping[str, Any]: ...
