"""Build track files from a centre-line description, and write them in the house style.

Hand-writing a valid 2.0 file is tedious: every sector needs four vertices, matching neighbor
edges both ways, and arcs must meet their vertices exactly. A course is therefore described as a
chain of :class:`Straight` and :class:`Turn` pieces; :func:`build_track` lays down lanes (lines
and arcs round shared center vertices), convex quadrilateral sectors (arcs split so a chord
never cuts a lane), walls and entry/exit links. Up to two straights may leave their length open
(``None``): they are solved so the loop closes. :func:`dump_track` writes JSON with C comments
like the original files: a leading block comment, tabs, and the index beside every vertex.

The shipped tracks in ``config/tracks`` are :data:`DESIGNS`, written by
``python -m wrtfd.tracks.build DIR``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wrtfd.errors import TrackError
from wrtfd.tracks.model import Edge, Lane, Sector, Segment, Track

__all__ = [
    "DESIGNS",
    "Design",
    "Straight",
    "Turn",
    "build_track",
    "dump_track",
    "write_designs",
]


@dataclass(frozen=True, slots=True)
class Straight:
    length_m: float | None  # None: solved to close the loop
    climb_m: float = 0.0


@dataclass(frozen=True, slots=True)
class Turn:
    radius_m: float  # of the centre line
    angle_deg: float  # > 0 right (clockwise seen from above), < 0 left
    climb_m: float = 0.0


Piece = Straight | Turn


@dataclass(frozen=True, slots=True)
class Design:
    name: str
    comment: str
    pieces: tuple[Piece, ...]
    half_width_m: float
    lane_offsets_m: tuple[float, ...]  # left to right, positive = right of the centre line
    start_xz: tuple[float, float] = (0.0, 0.0)
    heading_deg: float = 0.0  # 0 = +X, 90 = +Z
    altitude_m: float = 0.0
    revision: str | None = None
    max_sector_deg: float = 15.0
    max_sector_m: float = 60.0
    timing_sectors_m: tuple[float, ...] = ()
    geo: tuple[float, float] | None = None  # (lat, lon) of the origin: the track laid on the globe
    extra: dict[str, Any] = field(default_factory=dict)


def _solve_open_lengths(d: Design) -> list[float]:
    """Lengths of the pieces with the open straights solved so the loop closes."""
    open_idx = [i for i, p in enumerate(d.pieces) if isinstance(p, Straight) and p.length_m is None]
    if len(open_idx) > 2:
        raise TrackError(f"{d.name}: at most two straights may have an open length")
    x, z = d.start_xz
    h = math.radians(d.heading_deg)
    dirs: dict[int, tuple[float, float]] = {}
    total_turn = 0.0
    for i, p in enumerate(d.pieces):
        if isinstance(p, Straight):
            if p.length_m is None:
                dirs[i] = (math.cos(h), math.sin(h))
            else:
                x += p.length_m * math.cos(h)
                z += p.length_m * math.sin(h)
        else:
            x, z, h = _turn_end(x, z, h, p.radius_m, p.angle_deg)
            total_turn += p.angle_deg
    if abs(abs(total_turn) - 360.0) > 1e-9:
        raise TrackError(f"{d.name}: turns add up to {total_turn} degrees, not +-360")
    ex, ez = d.start_xz[0] - x, d.start_xz[1] - z
    lengths = [p.length_m if isinstance(p, Straight) and p.length_m is not None else 0.0 for p in d.pieces]
    if len(open_idx) == 2:
        (ax, az), (bx, bz) = dirs[open_idx[0]], dirs[open_idx[1]]
        det = ax * bz - az * bx
        if abs(det) < 1e-9:
            raise TrackError(f"{d.name}: the two open straights are parallel")
        la = (ex * bz - ez * bx) / det
        lb = (ax * ez - az * ex) / det
        lengths[open_idx[0]], lengths[open_idx[1]] = la, lb
    elif math.hypot(ex, ez) > 1e-6:
        raise TrackError(f"{d.name}: the loop misses its start by {math.hypot(ex, ez):.3f} m")
    if any(length <= 0 for i, length in enumerate(lengths) if isinstance(d.pieces[i], Straight)):
        raise TrackError(f"{d.name}: closing the loop needs a straight of length {min(lengths):.2f} m")
    if abs(sum(p.climb_m for p in d.pieces)) > 1e-9:
        raise TrackError(f"{d.name}: climbs do not add up to zero")
    return lengths


def _turn_end(x: float, z: float, h: float, r: float, angle_deg: float) -> tuple[float, float, float]:
    sign = 1.0 if angle_deg > 0 else -1.0
    rx, rz = -math.sin(h), math.cos(h)  # right of travel
    cx, cz = x + sign * r * rx, z + sign * r * rz
    phi0 = math.atan2(z - cz, x - cx)
    phi1 = phi0 + math.radians(angle_deg)
    return cx + r * math.cos(phi1), cz + r * math.sin(phi1), h + math.radians(angle_deg)


class _Vertices:
    def __init__(self) -> None:
        self.items: list[tuple[float, float, float]] = []
        self.groups: list[tuple[int, str]] = []

    def group(self, label: str) -> None:
        self.groups.append((len(self.items), label))

    def add(self, x: float, y: float, z: float) -> int:
        self.items.append((_round(x), _round(y), _round(z)))
        return len(self.items) - 1


def _round(v: float) -> float:
    r = round(v, 3)
    return 0.0 if r == 0 else r


def build_track(d: Design) -> tuple[Track, list[tuple[int, str]]]:
    """Lay out ``d``; returns the track and the vertex group labels for :func:`dump_track`.

    :raises TrackError: when the pieces do not make a closed loop.
    """
    lengths = _solve_open_lengths(d)
    # 1. walk the centre line: piece boundaries and sector cross-sections
    x, z = d.start_xz
    h = math.radians(d.heading_deg)
    y = d.altitude_m
    bounds: list[tuple[float, float, float, float]] = []  # (x, z, y, heading) at each piece start
    cross: list[tuple[float, float, float, float]] = []  # sector cross-sections
    centers: list[tuple[float, float, float] | None] = []
    for i, p in enumerate(d.pieces):
        bounds.append((x, z, y, h))
        if isinstance(p, Straight):
            n = max(1, math.ceil(lengths[i] / d.max_sector_m))
            for k in range(n):
                u = k / n
                cross.append(
                    (x + lengths[i] * u * math.cos(h), z + lengths[i] * u * math.sin(h), y + p.climb_m * u, h)
                )
            x += lengths[i] * math.cos(h)
            z += lengths[i] * math.sin(h)
            centers.append(None)
        else:
            sign = 1.0 if p.angle_deg > 0 else -1.0
            cx, cz = x - sign * p.radius_m * math.sin(h), z + sign * p.radius_m * math.cos(h)
            centers.append((cx, cz, y))
            n = max(1, math.ceil(abs(p.angle_deg) / d.max_sector_deg))
            phi0 = math.atan2(z - cz, x - cx)
            for k in range(n):
                a = math.radians(p.angle_deg) * k / n
                cross.append(
                    (
                        cx + p.radius_m * math.cos(phi0 + a),
                        cz + p.radius_m * math.sin(phi0 + a),
                        y + p.climb_m * k / n,
                        h + a,
                    )
                )
            x, z, h = _turn_end(x, z, h, p.radius_m, p.angle_deg)
        y += p.climb_m
    # 2. vertices: arc centres, lane vertices, sector corners
    vs = _Vertices()
    vs.group("arc-center points")
    center_idx = [vs.add(c[0], c[2], c[1]) if c is not None else -1 for c in centers]
    lane_idx: list[list[int]] = []
    for li, off in enumerate(d.lane_offsets_m):
        vs.group(f"lane {li} vertices")
        row = []
        for bx, bz, by, bh in bounds:
            row.append(vs.add(bx - off * math.sin(bh), by, bz + off * math.cos(bh)))
        lane_idx.append(row)
    vs.group("sector corners (left, right)")
    corners: list[tuple[int, int]] = []
    w = d.half_width_m
    for cx_, cz_, cy_, ch in cross:
        rx, rz = -math.sin(ch), math.cos(ch)
        left = vs.add(cx_ - w * rx, cy_, cz_ - w * rz)
        right = vs.add(cx_ + w * rx, cy_, cz_ + w * rz)
        corners.append((left, right))
    v = vs.items
    # 3. lanes
    lanes: list[Lane] = []
    npieces = len(d.pieces)
    for li in range(len(d.lane_offsets_m)):
        segs: list[Segment] = []
        for i, p in enumerate(d.pieces):
            a, b = lane_idx[li][i], lane_idx[li][(i + 1) % npieces]
            if isinstance(p, Straight):
                segs.append(Segment("line", a, b, round(math.dist(v[a], v[b]), 4)))
            else:
                c = center_idx[i]
                r = math.hypot(v[a][0] - v[c][0], v[a][2] - v[c][2])
                segs.append(
                    Segment("arc", a, b, round(r * math.radians(abs(p.angle_deg)), 4), c, p.angle_deg)
                )
        lanes.append(Lane(len(segs), tuple(segs)))
    # 4. sectors: quads RR -> FR (wall) -> FL (exit) -> RL (wall) -> RR (entry)
    sectors: list[Sector] = []
    ns = len(corners)
    for k in range(ns):
        lk, rk = corners[k]
        lf, rf = corners[(k + 1) % ns]
        edges = (
            Edge("wall", rk),
            Edge("exit", rf, (k + 1) % ns, 3),
            Edge("wall", lf),
            Edge("entry", lk, (k - 1) % ns, 1),
        )
        sectors.append(Sector(4, edges))
    ext: dict[str, Any] = dict(d.extra)
    if d.timing_sectors_m:
        ext.setdefault("wrtfd", {})["timing-sectors"] = list(d.timing_sectors_m)
    if d.geo is not None:
        ext.setdefault("wrtfd", {})["geo"] = {"lat": d.geo[0], "lon": d.geo[1]}
    track = Track(
        version="2.0",
        name=d.name,
        num_vertices=len(v),
        vertices=tuple(v),
        num_sectors=len(sectors),
        sectors=tuple(sectors),
        num_lanes=len(lanes),
        lanes=tuple(lanes),
        revision=d.revision,
        extensions=ext,
    )
    return track, vs.groups


def _num(value: float) -> str:
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.4f}".rstrip("0").rstrip(".")


def _json_value(value: Any) -> str:
    import json

    return json.dumps(value, separators=(", ", " : "))


def dump_track(track: Track, *, comment: str = "", groups: Sequence[tuple[int, str]] = ()) -> str:
    """Track-file text in the style of the original files (comments, tabs, vertex indices)."""
    out: list[str] = []
    head = comment.strip().splitlines() or [track.name]
    out.append("/* " + head[0])
    out.extend(" *" + (f" {line}" if line else "") for line in head[1:])
    out.append(" */")
    out.append("{")
    out.append(f'  "version" : "{track.version}",')
    out.append(f'  "name" : {_json_value(track.name)},')
    if track.revision is not None:
        out.append(f'  "revision" : {_json_value(track.revision)},')
    for key, value in track.extensions.items():
        out.append(f"  {_json_value(key)} : {_json_value(value)},")
    out.append(f'  "num-vertices" : {len(track.vertices)},')
    out.append('  "vertices" : [')
    labels = dict(groups)
    for i, (x, y, z) in enumerate(track.vertices):
        if i in labels:
            out.append(f"    /* {labels[i]} */")
        sep = "," if i + 1 < len(track.vertices) else ""
        out.append(f"\t    [{_num(x)}, {_num(y)}, {_num(z)}]{sep}\t/* {i} */")
    out.append("  ],")
    out.append(f'  "num-sectors" : {len(track.sectors)},')
    out.append('  "sectors" : [')
    for si, sec in enumerate(track.sectors):
        out.append(f"    {{ /* sector {si} */")
        out.append(f'      "num-edges" : {len(sec.edges)},')
        out.append('      "edges" : [')
        for ei, e in enumerate(sec.edges):
            fields = [f'"kind" : "{e.kind}"', f'"start" : {e.start}']
            if e.neighbor is not None:
                fields.append(f'"neighbor" : {e.neighbor}')
            if e.neighbor_edge is not None:
                fields.append(f'"neighbor-edge" : {e.neighbor_edge}')
            sep = "," if ei + 1 < len(sec.edges) else ""
            out.append("\t  { " + ", ".join(fields) + " }" + sep)
        out.append(
            "        ]"
            + (f',\n      "attributes" : {_json_value(dict(sec.attributes))}' if sec.attributes else "")
        )
        out.append("    }" + ("," if si + 1 < len(track.sectors) else ""))
    out.append("  ],")
    out.append(f'  "num-lanes" : {len(track.lanes)},')
    out.append('  "lanes" : [')
    for li, lane in enumerate(track.lanes):
        out.append(f"    {{ /* lane {li} */")
        out.append(f'      "num-segments" : {len(lane.segments)},')
        out.append('      "segments" : [')
        for gi, sgm in enumerate(lane.segments):
            fields = [f'"kind" : "{sgm.kind}"', f'"start" : {sgm.start}', f'"end" : {sgm.end}']
            if sgm.kind == "arc":
                fields += [f'"center" : {sgm.center}', f'"angle" : {_num(sgm.angle_deg or 0.0)}']
            fields.append(f'"length" : {_num(sgm.length)}')
            sep = "," if gi + 1 < len(lane.segments) else ""
            out.append("\t  { " + ", ".join(fields) + " }" + sep)
        out.append("        ]")
        out.append("    }" + ("," if li + 1 < len(track.lanes) else ""))
    out.append("  ]")
    out.append("}")
    return "\n".join(out) + "\n"


# --- the shipped tracks -----------------------------------------------------------------------

DESIGNS: dict[str, Design] = {
    "oval": Design(
        name="Small oval track",
        comment="oval.trk\n\nA small oval track with two lanes, driven clockwise (right turns).\n"
        "Made for wrtfd in the style of the original course files.",
        pieces=(Straight(40.0), Turn(18.0, 180.0), Straight(40.0), Turn(18.0, 180.0)),
        half_width_m=6.0,
        lane_offsets_m=(-2.0, 2.0),
        start_xz=(25.0, 7.0),
        revision="1",
        max_sector_deg=30.0,
        timing_sectors_m=(0.0, 60.0, 120.0),
    ),
    "road": Design(
        name="Hillside road course",
        comment="road.trk\n\nA road course with left and right turns of several radii and 14 m of\n"
        "elevation change: a climb through the esses, a crest, and a long downhill run.\n"
        'Lane 0 is the racing line; timing sectors are in the "wrtfd" extension, and so is\n'
        '"geo": where the origin lies on the globe (x east, z north), an invented place for\n'
        "simulated track days.",
        pieces=(
            Straight(220.0),  # main straight
            Turn(30.0, 90.0),  # T1 right
            Straight(60.0, climb_m=3.0),
            Turn(60.0, -60.0, climb_m=3.0),  # T2 left, climbing
            Turn(45.0, 75.0, climb_m=2.0),  # T3 right
            Straight(120.0, climb_m=6.0),  # up the hill
            Turn(25.0, 120.0),  # T4 tight right at the crest
            Straight(None, climb_m=-6.0),
            Turn(80.0, -60.0, climb_m=-4.0),  # T5 fast left, downhill
            Turn(40.0, 90.0, climb_m=-4.0),  # T6 right
            Straight(None),
            Turn(35.0, 105.0),  # T7 onto the main straight
        ),
        half_width_m=7.0,
        lane_offsets_m=(0.0,),
        start_xz=(0.0, 0.0),
        altitude_m=10.0,
        revision="1",
        timing_sectors_m=(0.0, 400.0, 800.0),
        geo=(44.9, 2.5),
    ),
    "kart": Design(
        name="Kart circuit",
        comment="kart.trk\n\nA short kart circuit with tight hairpins both ways and two lanes.",
        pieces=(
            Straight(60.0),
            Turn(8.0, 135.0),  # hairpin right
            Straight(25.0),
            Turn(10.0, -120.0),  # left
            Turn(7.0, 180.0),  # hairpin right
            Straight(None),
            Turn(12.0, 45.0),
            Straight(None),
            Turn(9.0, 120.0),
        ),
        half_width_m=4.0,
        lane_offsets_m=(-1.5, 1.5),
        start_xz=(0.0, 0.0),
        revision="1",
        max_sector_deg=30.0,
        max_sector_m=25.0,
        timing_sectors_m=(),
    ),
}


def write_designs(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for key, design in DESIGNS.items():
        track, groups = build_track(design)
        path = directory / f"{key}.trk"
        path.write_text(dump_track(track, comment=design.comment, groups=groups))
        written.append(path)
    return written


if __name__ == "__main__":
    write_designs(Path(sys.argv[1] if len(sys.argv) > 1 else "config/tracks"))
