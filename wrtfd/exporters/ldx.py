"""The ``.ldx`` beside a MoTeC ``.ld``: where i2 finds the lap splits.

An XML document ``LDXFile`` (version 1.6) with one layer whose ``MarkerGroup "Beacons"`` holds a
``Marker`` (class ``BCN``) per crossing of the line, ``Time`` in microseconds from the first
sample of the log, and ``Details`` strings (total laps, fastest time and lap). i2 counts the
stretch before the first beacon as lap 1 (the out-lap), as loggers do.

Markers (user events, docs/markers.md) come from the frames (:mod:`wrtfd.format.markers`) and
are written as a second marker group (class ``MRK``, named by their note).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Marker", "ldx_document"]


@dataclass(frozen=True, slots=True)
class Marker:
    """A named instant of a session, seconds from the first sample of the log."""

    time_s: float
    name: str


def _lap_time_text(seconds: float) -> str:
    minutes, rest = divmod(seconds, 60.0)
    return f"{int(minutes)}:{rest:06.3f}"


def _marker(parent: ET.Element, cls: str, name: str, time_s: float) -> None:
    ET.SubElement(
        parent,
        "Marker",
        {"Version": "100", "ClassName": cls, "Name": name, "Flags": "77", "Time": f"{time_s * 1e6:.17e}"},
    )


def ldx_document(
    crossings_s: Sequence[float],
    lap_times_s: Sequence[tuple[int, float]],
    markers: Sequence[Marker] = (),
) -> bytes:
    """The ``.ldx`` text: a beacon per line crossing (seconds from the log's first sample), the
    laps as (i2's lap number, time) for the details, and the markers (see module doc)."""
    root = ET.Element(
        "LDXFile", {"Locale": "English_United Kingdom.1252", "DefaultLocale": "C", "Version": "1.6"}
    )
    layers = ET.SubElement(root, "Layers")
    layer = ET.SubElement(layers, "Layer")
    block = ET.SubElement(layer, "MarkerBlock")
    beacons = ET.SubElement(block, "MarkerGroup", {"Name": "Beacons", "Index": str(len(crossings_s))})
    for k, t in enumerate(sorted(crossings_s), 1):
        _marker(beacons, "BCN", f"Manual.{k}", t)
    if markers:
        group = ET.SubElement(block, "MarkerGroup", {"Name": "Markers", "Index": str(len(markers))})
        for m in sorted(markers, key=lambda m: m.time_s):
            _marker(group, "MRK", m.name, m.time_s)
    ET.SubElement(layer, "RangeBlock")
    details = ET.SubElement(layers, "Details")
    ET.SubElement(details, "String", {"Id": "Total Laps", "Value": str(len(crossings_s) + 1)})
    if lap_times_s:
        number, best = min(lap_times_s, key=lambda item: item[1])
        ET.SubElement(details, "String", {"Id": "Fastest Time", "Value": _lap_time_text(best)})
        ET.SubElement(details, "String", {"Id": "Fastest Lap", "Value": str(number)})
    ET.indent(root)
    return b'<?xml version="1.0"?>\n' + ET.tostring(root, encoding="utf-8") + b"\n"
