"""Check what the track format implies, beyond types: one :class:`TrackFinding` per violation.

Rules (the ``rule`` slug of each finding):

==================  =========================================================================
count-mismatch      a ``num-*`` field differs from the length of its array
index-range         a vertex, sector or edge index is out of range (or does not fit 16 bits)
sector-too-small    a sector has fewer than 3 edges
sector-not-ccw      a sector's edges are not in counter-clockwise order seen from above
sector-not-convex   a sector polygon is not convex
neighbor-missing    an entry/exit edge lacks ``neighbor``/``neighbor-edge``
wall-neighbor       a wall edge carries ``neighbor`` fields
neighbor-mismatch   the neighbor edge does not point back, has the wrong kind, or other vertices
lane-empty          a lane has no segments
lane-not-closed     a segment does not start where the previous one ended (the loop wraps)
line-length         a line's ``length`` differs from the distance between its vertices
arc-radius          an arc's center is not equally far from its start and end
arc-length          an arc's ``length`` differs from radius x |angle|
arc-endpoint        rotating the start round the center by ``angle`` does not reach the end
==================  =========================================================================

Distances use the X-Z plane (Y is altitude) for radii and arcs, and 3D for lines, as a car
driving a sloped straight covers the 3D distance. Counter-clockwise follows the notes beside the
format: X right, Z down the screen, ``sum(z_i * x_(i+1) - x_i * z_(i+1)) > 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wrtfd.tracks.model import Track

__all__ = ["DEFAULT_ABS_TOL_M", "DEFAULT_REL_TOL", "RULES", "TrackFinding", "validate_track"]

DEFAULT_ABS_TOL_M = 0.01
DEFAULT_REL_TOL = 1e-3
MAX_INDEX = 65535  # the original loader stored indices in 16 bits

RULES = (
    "count-mismatch",
    "index-range",
    "sector-too-small",
    "sector-not-ccw",
    "sector-not-convex",
    "neighbor-missing",
    "wall-neighbor",
    "neighbor-mismatch",
    "lane-empty",
    "lane-not-closed",
    "line-length",
    "arc-radius",
    "arc-length",
    "arc-endpoint",
)


@dataclass(frozen=True, slots=True)
class TrackFinding:
    path: str  # JSON path in the file, e.g. "sectors[3].edges[1].neighbor-edge"
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message} [{self.rule}]"


def _cross2(ax: float, az: float, bx: float, bz: float) -> float:
    """The orientation product of the format notes (positive = counter-clockwise seen from above)."""
    return az * bx - ax * bz


class _Checker:
    def __init__(self, track: Track, abs_tol_m: float, rel_tol: float) -> None:
        self.t = track
        self.abs_tol = abs_tol_m
        self.rel_tol = rel_tol
        self.findings: list[TrackFinding] = []

    def add(self, path: str, rule: str, message: str) -> None:
        self.findings.append(TrackFinding(path, rule, message))

    def close(self, expected: float, actual: float) -> bool:
        return abs(expected - actual) <= self.abs_tol + self.rel_tol * abs(expected)

    def vertex_ok(self, index: int, path: str) -> bool:
        n = len(self.t.vertices)
        if 0 <= index < n and index <= MAX_INDEX:
            return True
        self.add(path, "index-range", f"vertex index {index} is out of range (0..{n - 1})")
        return False

    def run(self) -> list[TrackFinding]:
        t = self.t
        for key, declared, actual in (
            ("num-vertices", t.num_vertices, len(t.vertices)),
            ("num-sectors", t.num_sectors, len(t.sectors)),
            ("num-lanes", t.num_lanes, len(t.lanes)),
        ):
            if declared != actual:
                self.add(key, "count-mismatch", f"{key} is {declared} but the array has {actual} elements")
        for si in range(len(t.sectors)):
            self.sector(si)
        for li in range(len(t.lanes)):
            self.lane(li)
        return self.findings

    # --- sectors -------------------------------------------------------------------------------

    def sector(self, si: int) -> None:
        sec = self.t.sectors[si]
        path = f"sectors[{si}]"
        if sec.num_edges != len(sec.edges):
            self.add(
                f"{path}.num-edges",
                "count-mismatch",
                f"num-edges is {sec.num_edges} but the array has {len(sec.edges)} elements",
            )
        if len(sec.edges) < 3:
            self.add(
                f"{path}.edges", "sector-too-small", f"a sector needs at least 3 edges, has {len(sec.edges)}"
            )
        starts_ok = all(
            [self.vertex_ok(e.start, f"{path}.edges[{ei}].start") for ei, e in enumerate(sec.edges)]
        )
        for ei in range(len(sec.edges)):
            self.edge_links(si, ei)
        if starts_ok and len(sec.edges) >= 3:
            self.polygon(si)

    def polygon(self, si: int) -> None:
        sec = self.t.sectors[si]
        path = f"sectors[{si}].edges"
        pts = [(self.t.vertices[e.start][0], self.t.vertices[e.start][2]) for e in sec.edges]
        n = len(pts)
        twice_area = sum(
            _cross2(pts[i][0], pts[i][1], pts[(i + 1) % n][0], pts[(i + 1) % n][1]) for i in range(n)
        )
        if twice_area <= 0:
            self.add(
                path,
                "sector-not-ccw",
                f"edges are not counter-clockwise seen from above (signed area {twice_area / 2:.3f})",
            )
            return
        scale = max(1.0, max(abs(c) for p in pts for c in p))
        for i in range(n):
            ax, az = pts[i]
            bx, bz = pts[(i + 1) % n]
            cx, cz = pts[(i + 2) % n]
            turn = _cross2(bx - ax, bz - az, cx - bx, cz - bz)
            if turn < -1e-9 * scale * scale:
                self.add(
                    f"{path}[{(i + 1) % n}]",
                    "sector-not-convex",
                    f"the polygon turns clockwise at vertex {self.t.sectors[si].edges[(i + 1) % n].start}"
                    " (sectors must be convex)",
                )
                return

    def edge_links(self, si: int, ei: int) -> None:
        t = self.t
        sec = t.sectors[si]
        edge = sec.edges[ei]
        path = f"sectors[{si}].edges[{ei}]"
        if edge.kind == "wall":
            if edge.neighbor is not None or edge.neighbor_edge is not None:
                self.add(
                    path, "wall-neighbor", "a wall edge has no neighbor; remove 'neighbor'/'neighbor-edge'"
                )
            return
        if edge.neighbor is None or edge.neighbor_edge is None:
            self.add(path, "neighbor-missing", f"an {edge.kind} edge needs 'neighbor' and 'neighbor-edge'")
            return
        ni, nei = edge.neighbor, edge.neighbor_edge
        if not (0 <= ni < len(t.sectors)):
            self.add(
                f"{path}.neighbor",
                "index-range",
                f"sector index {ni} is out of range (0..{len(t.sectors) - 1})",
            )
            return
        other_sec = t.sectors[ni]
        if not (0 <= nei < len(other_sec.edges)):
            self.add(
                f"{path}.neighbor-edge",
                "index-range",
                f"edge index {nei} is out of range for sector {ni} (0..{len(other_sec.edges) - 1})",
            )
            return
        other = other_sec.edges[nei]
        want_kind = "exit" if edge.kind == "entry" else "entry"
        if other.kind != want_kind:
            self.add(
                path,
                "neighbor-mismatch",
                f"sector {ni} edge {nei} is a {other.kind} edge;"
                f" an {edge.kind} edge must meet an {want_kind} edge",
            )
            return
        if other.neighbor != si or other.neighbor_edge != ei:
            self.add(
                path,
                "neighbor-mismatch",
                f"sector {ni} edge {nei} points to sector {other.neighbor} edge {other.neighbor_edge},"
                f" not back to sector {si} edge {ei}",
            )
            return
        # Same segment, opposite direction: this edge a->b, the neighbor's b->a.
        a = edge.start
        b = sec.edges[(ei + 1) % len(sec.edges)].start
        oa = other.start
        ob = other_sec.edges[(nei + 1) % len(other_sec.edges)].start
        n = len(t.vertices)
        if not all(0 <= v < n for v in (a, b, oa, ob)):
            return  # reported as index-range already
        if not (self._same(a, ob) and self._same(b, oa)):
            self.add(
                path,
                "neighbor-mismatch",
                f"edge runs {a}->{b} but sector {ni} edge {nei} runs {oa}->{ob}; shared edges must be the"
                " same two vertices in opposite directions",
            )

    def _same(self, i: int, j: int) -> bool:
        if i == j:
            return True
        p, q = self.t.vertices[i], self.t.vertices[j]
        return math.dist(p, q) <= self.abs_tol

    # --- lanes ---------------------------------------------------------------------------------

    def lane(self, li: int) -> None:
        lane = self.t.lanes[li]
        path = f"lanes[{li}]"
        if lane.num_segments != len(lane.segments):
            self.add(
                f"{path}.num-segments",
                "count-mismatch",
                f"num-segments is {lane.num_segments} but the array has {len(lane.segments)} elements",
            )
        if not lane.segments:
            self.add(f"{path}.segments", "lane-empty", "a lane needs at least one segment")
            return
        n = len(lane.segments)
        for i, seg in enumerate(lane.segments):
            sp = f"{path}.segments[{i}]"
            prev = lane.segments[i - 1]
            if seg.start != prev.end and not (
                0 <= seg.start < len(self.t.vertices)
                and 0 <= prev.end < len(self.t.vertices)
                and self._same(seg.start, prev.end)
            ):
                where = (
                    "the last segment's end (lanes are closed loops)"
                    if i == 0 and n > 0
                    else "the previous end"
                )
                self.add(
                    f"{sp}.start",
                    "lane-not-closed",
                    f"segment starts at vertex {seg.start} but {where} is vertex {prev.end}",
                )
            ok = self.vertex_ok(seg.start, f"{sp}.start") & self.vertex_ok(seg.end, f"{sp}.end")
            if seg.kind == "arc":
                ok &= self.vertex_ok(seg.center if seg.center is not None else -1, f"{sp}.center")
            if ok:
                if seg.kind == "line":
                    self.line(sp, seg.start, seg.end, seg.length)
                else:
                    self.arc(sp, seg.start, seg.end, seg.center or 0, seg.angle_deg or 0.0, seg.length)

    def line(self, path: str, a: int, b: int, length: float) -> None:
        d = math.dist(self.t.vertices[a], self.t.vertices[b])
        if not self.close(d, length):
            self.add(
                f"{path}.length",
                "line-length",
                f"length is {length:g} but vertices {a} and {b} are {d:.4f} apart",
            )

    def arc(self, path: str, a: int, b: int, c: int, angle_deg: float, length: float) -> None:
        v = self.t.vertices
        r0 = math.hypot(v[a][0] - v[c][0], v[a][2] - v[c][2])
        r1 = math.hypot(v[b][0] - v[c][0], v[b][2] - v[c][2])
        if not self.close(r0, r1) or r0 <= self.abs_tol:
            self.add(
                f"{path}.center",
                "arc-radius",
                f"center {c} is {r0:.4f} from the start {a} but {r1:.4f} from the end {b}",
            )
            return
        expected = r0 * math.radians(abs(angle_deg))
        if not self.close(expected, length):
            self.add(
                f"{path}.length",
                "arc-length",
                f"length is {length:g} but radius {r0:.4f} x |{angle_deg:g} deg| is {expected:.4f}",
            )
        # Positive angles turn clockwise seen from above: a plain rotation in (x, z) coordinates.
        phi = math.atan2(v[a][2] - v[c][2], v[a][0] - v[c][0]) + math.radians(angle_deg)
        ex, ez = v[c][0] + r0 * math.cos(phi), v[c][2] + r0 * math.sin(phi)
        miss = math.hypot(ex - v[b][0], ez - v[b][2])
        if miss > self.abs_tol + self.rel_tol * r0:
            self.add(
                f"{path}.angle",
                "arc-endpoint",
                f"turning vertex {a} by {angle_deg:g} deg round center {c} ends {miss:.3f} m from vertex {b}"
                " (negative angles turn left, positive right)",
            )


def validate_track(
    track: Track, *, abs_tol_m: float = DEFAULT_ABS_TOL_M, rel_tol: float = DEFAULT_REL_TOL
) -> list[TrackFinding]:
    """Every violation of what the format implies; an empty list means the track is sound."""
    return _Checker(track, abs_tol_m, rel_tol).run()
