"""A lane as a continuous path with arc length; projection of positions onto it; sector lookup.

Positions are track coordinates (x, z) on the ground with y the altitude. Lap distance is the
arc length along the lane from its first segment's start (the start/finish line). Lateral offset
is positive to the *right* of the direction of travel (right = ``f x Y`` for travel direction f),
the side arcs with positive angles turn towards.

Segment lengths come from the geometry itself, not from the ``length`` fields (the validator
checks those agree), so lap distances are exact even for a file with rounded lengths.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from wrtfd.errors import TrackError
from wrtfd.tracks.model import Track

__all__ = ["LanePath", "PathSegment", "Projection", "SectorMap"]

TWO_PI = 2.0 * math.pi
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class PathSegment:
    """One segment in absolute terms. For arcs ``angle_rad`` is signed (> 0 = right turn)."""

    kind: str
    s0_m: float  # lap distance at the start
    length_m: float
    x0: float
    z0: float
    y0: float
    x1: float
    z1: float
    y1: float
    cx: float = 0.0
    cz: float = 0.0
    radius_m: float = 0.0
    phi0_rad: float = 0.0  # angle of (start - center) in the (x, z) plane
    angle_rad: float = 0.0

    def at(self, u: float) -> tuple[float, float, float, float, float]:
        """Point and unit tangent at fraction ``u`` in [0, 1]: (x, z, y, fx, fz)."""
        y = self.y0 + (self.y1 - self.y0) * u
        if self.kind == "line":
            fx, fz = (self.x1 - self.x0) / self.length_m, (self.z1 - self.z0) / self.length_m
            # the 3D length includes climbing; tangent is the ground direction
            g = math.hypot(fx, fz) or 1.0
            return self.x0 + (self.x1 - self.x0) * u, self.z0 + (self.z1 - self.z0) * u, y, fx / g, fz / g
        phi = self.phi0_rad + self.angle_rad * u
        c, s = math.cos(phi), math.sin(phi)
        sign = 1.0 if self.angle_rad > 0 else -1.0
        return self.cx + self.radius_m * c, self.cz + self.radius_m * s, y, -s * sign, c * sign

    def nearest(self, x: float, z: float) -> tuple[float, float]:
        """(u, squared gap) of the point of this segment nearest to (x, z); plain floats, no numpy."""
        if self.kind == "line":
            dx, dz = self.x1 - self.x0, self.z1 - self.z0
            dd = dx * dx + dz * dz
            u = 0.0 if dd <= 0 else min(1.0, max(0.0, ((x - self.x0) * dx + (z - self.z0) * dz) / dd))
            fx, fz = self.x0 + dx * u, self.z0 + dz * u
        else:
            sweep = abs(self.angle_rad)
            sign = 1.0 if self.angle_rad >= 0 else -1.0
            delta = ((math.atan2(z - self.cz, x - self.cx) - self.phi0_rad) * sign) % TWO_PI
            # inside the sweep, or clamped to whichever end is nearer round the circle
            past_end, before_start = delta - sweep, TWO_PI - delta
            u = delta / sweep if delta <= sweep else (1.0 if past_end < before_start else 0.0)
            phi = self.phi0_rad + self.angle_rad * u
            fx, fz = self.cx + self.radius_m * math.cos(phi), self.cz + self.radius_m * math.sin(phi)
        return u, (x - fx) ** 2 + (z - fz) ** 2

    @property
    def curvature_per_m(self) -> float:
        """Signed curvature: > 0 turning right, < 0 left, 0 on lines."""
        if self.kind == "line":
            return 0.0
        return (1.0 if self.angle_rad > 0 else -1.0) / self.radius_m


@dataclass(frozen=True, slots=True)
class Projection:
    distance_m: float  # lap distance of the nearest lane point, in [0, length)
    offset_m: float  # signed lateral offset, positive to the right
    gap_m: float  # unsigned distance from the point to the lane
    segment: int


class LanePath:
    """One lane of a track as a closed path parametrised by lap distance.

    :raises TrackError: when the lane does not exist or its indices are out of range.
    """

    def __init__(self, track: Track, lane: int = 0) -> None:
        if not (0 <= lane < len(track.lanes)):
            raise TrackError(f"{track.source}: lane {lane} does not exist (the track has {len(track.lanes)})")
        v = track.vertices
        segs: list[PathSegment] = []
        s = 0.0
        for i, seg in enumerate(track.lanes[lane].segments):
            idx = [seg.start, seg.end] + (
                [seg.center] if seg.kind == "arc" and seg.center is not None else []
            )
            if any(not (0 <= k < len(v)) for k in idx):
                raise TrackError(
                    f"{track.source}: lanes[{lane}].segments[{i}] uses a vertex index out of range"
                )
            (x0, y0, z0), (x1, y1, z1) = v[seg.start], v[seg.end]
            if seg.kind == "line":
                length = math.dist((x0, y0, z0), (x1, y1, z1))
                ps = PathSegment("line", s, length, x0, z0, y0, x1, z1, y1)
            else:
                cx, _, cz = v[seg.center or 0]
                r = math.hypot(x0 - cx, z0 - cz)
                ang = math.radians(seg.angle_deg or 0.0)
                length = r * abs(ang)
                ps = PathSegment(
                    "arc", s, length, x0, z0, y0, x1, z1, y1, cx, cz, r, math.atan2(z0 - cz, x0 - cx), ang
                )
            if length <= 0.0:
                raise TrackError(f"{track.source}: lanes[{lane}].segments[{i}] has zero length")
            segs.append(ps)
            s += length
        if not segs:
            raise TrackError(f"{track.source}: lane {lane} has no segments")
        self.segments: tuple[PathSegment, ...] = tuple(segs)
        self.length_m: float = s
        self._starts = np.array([p.s0_m for p in segs])
        # the same starts as plain floats: a simulator asks for one point per tick, several times,
        # and bisect on a list costs a tenth of numpy's searchsorted on a scalar
        self._starts_list: list[float] = [p.s0_m for p in segs]
        self._build_arrays()

    def _build_arrays(self) -> None:
        segs = self.segments
        self._is_arc = np.array([p.kind == "arc" for p in segs])
        self._a = np.array([[p.x0, p.z0] for p in segs])
        self._b = np.array([[p.x1, p.z1] for p in segs])
        self._c = np.array([[p.cx, p.cz] for p in segs])
        self._r = np.array([p.radius_m for p in segs])
        self._phi0 = np.array([p.phi0_rad for p in segs])
        self._ang = np.array([p.angle_rad for p in segs])
        self._len = np.array([p.length_m for p in segs])

    # --- evaluation ---------------------------------------------------------------------------

    def _locate(self, s_m: float) -> tuple[PathSegment, float]:
        s = s_m % self.length_m
        i = max(0, bisect_right(self._starts_list, s) - 1)
        seg = self.segments[i]
        return seg, min(1.0, max(0.0, (s - seg.s0_m) / seg.length_m))

    def point_at(self, s_m: float) -> tuple[float, float, float]:
        """(x, y, z) of the lane at lap distance ``s_m`` (taken modulo the lap length)."""
        seg, u = self._locate(s_m)
        x, z, y, _, _ = seg.at(u)
        return x, y, z

    def heading_at(self, s_m: float) -> tuple[float, float]:
        """Unit travel direction (fx, fz) on the ground at ``s_m``."""
        seg, u = self._locate(s_m)
        _, _, _, fx, fz = seg.at(u)
        return fx, fz

    def curvature_at(self, s_m: float) -> float:
        return self._locate(s_m)[0].curvature_per_m

    def segment_index_at(self, s_m: float) -> int:
        s = s_m % self.length_m
        return max(0, bisect_right(self._starts_list, s) - 1)

    # --- projection ---------------------------------------------------------------------------

    def _candidates(self, px: FloatArray, pz: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Per point and segment: squared gap and lap distance of the nearest point. Shapes (N, M)."""
        p = np.stack([px, pz], axis=-1)[:, None, :]  # (N, 1, 2)
        # lines: clamp the projection parameter
        d = self._b - self._a  # (M, 2)
        dd = np.maximum(np.einsum("mk,mk->m", d, d), 1e-300)
        u_line = np.clip(np.einsum("nmk,mk->nm", p - self._a, d) / dd, 0.0, 1.0)
        # arcs: angle round the center relative to the start, in the sweep direction
        rel = p - self._c
        phi = np.arctan2(rel[..., 1], rel[..., 0])
        sweep = np.abs(self._ang)
        sign = np.where(self._ang >= 0, 1.0, -1.0)
        delta = np.mod((phi - self._phi0) * sign, TWO_PI)  # 0..2pi along the sweep
        past_end = delta - sweep
        before_start = TWO_PI - delta
        with np.errstate(divide="ignore", invalid="ignore"):
            u_arc = np.where(
                delta <= sweep,
                delta / np.where(sweep > 0, sweep, 1.0),
                np.where(past_end < before_start, 1.0, 0.0),
            )
        u = np.where(self._is_arc, u_arc, u_line)
        # foot points
        fx_line = self._a[:, 0] + d[:, 0] * u
        fz_line = self._a[:, 1] + d[:, 1] * u
        ang = self._phi0 + self._ang * u
        fx_arc = self._c[:, 0] + self._r * np.cos(ang)
        fz_arc = self._c[:, 1] + self._r * np.sin(ang)
        fx = np.where(self._is_arc, fx_arc, fx_line)
        fz = np.where(self._is_arc, fz_arc, fz_line)
        gap2 = (px[:, None] - fx) ** 2 + (pz[:, None] - fz) ** 2
        s = self._starts + u * self._len
        return gap2, s

    def project_many(self, xs: npt.ArrayLike, zs: npt.ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Vectorised :meth:`project` without hints: (distance_m, offset_m, gap_m) arrays."""
        px = np.asarray(xs, dtype=np.float64).reshape(-1)
        pz = np.asarray(zs, dtype=np.float64).reshape(-1)
        out_s = np.empty(px.shape)
        out_off = np.empty(px.shape)
        out_gap = np.empty(px.shape)
        chunk = max(1, 200_000 // max(1, len(self.segments)))  # bound the (N, M) temporaries
        for lo in range(0, len(px), chunk):
            hi = min(len(px), lo + chunk)
            gap2, s = self._candidates(px[lo:hi], pz[lo:hi])
            best = np.argmin(gap2, axis=1)
            rows = np.arange(hi - lo)
            sb = s[rows, best] % self.length_m
            out_s[lo:hi] = sb
            out_gap[lo:hi] = np.sqrt(gap2[rows, best])
            out_off[lo:hi] = [
                self._offset(float(px[lo + k]), float(pz[lo + k]), float(sb[k])) for k in range(hi - lo)
            ]
        return out_s, out_off, out_gap

    def _offset(self, x: float, z: float, s_m: float) -> float:
        seg, u = self._locate(s_m)
        fxp, fzp, _, fx, fz = seg.at(u)
        # right of travel direction f = (fx, fz) is (-fz, fx)
        return (x - fxp) * -fz + (z - fzp) * fx

    def project(
        self, x: float, z: float, *, near_m: float | None = None, reach_m: float = 30.0, window_m: float = 3.0
    ) -> Projection:
        """Nearest lane point to (x, z).

        ``near_m`` (the previous lap distance) resolves places where the lane passes close to
        itself: the nearest point within ``reach_m`` of ``near_m`` along the loop wins, unless
        some other part of the lane is more than ``window_m`` closer.
        """
        gap2, s = self._candidates(np.array([float(x)]), np.array([float(z)]))
        g = np.sqrt(gap2[0])
        best = int(np.argmin(g))
        if near_m is not None:
            along = np.abs((s[0] - near_m + self.length_m / 2) % self.length_m - self.length_m / 2)
            near = np.flatnonzero(along <= reach_m)
            if len(near):
                local = int(near[int(np.argmin(g[near]))])
                if g[local] <= g[best] + window_m:
                    best = local
        sb = float(s[0, best]) % self.length_m
        return Projection(sb, self._offset(x, z, sb), float(g[best]), best)

    def project_near(self, x: float, z: float, segment: int, *, max_gap_m: float = 15.0) -> Projection:
        """Fast projection for a point near the previous one (telemetry at its own rate).

        Only the previous ``segment`` and its two neighbours each side are tried, in plain
        Python; when none is within ``max_gap_m`` it falls back to :meth:`project`.
        """
        n = len(self.segments)
        best_i, best_u, best_g2 = -1, 0.0, math.inf
        for k in (-2, -1, 0, 1, 2) if n > 5 else range(n):
            i = (segment + k) % n
            u, g2 = self.segments[i].nearest(x, z)
            if g2 < best_g2:
                best_i, best_u, best_g2 = i, u, g2
        if best_i < 0 or best_g2 > max_gap_m * max_gap_m:
            return self.project(x, z)
        seg = self.segments[best_i]
        s = (seg.s0_m + best_u * seg.length_m) % self.length_m
        fxp, fzp, _, fx, fz = seg.at(best_u)
        return Projection(s, (x - fxp) * -fz + (z - fzp) * fx, math.sqrt(best_g2), best_i)


class SectorMap:
    """Which sector polygon contains a point (sectors are convex and counter-clockwise)."""

    def __init__(self, track: Track) -> None:
        v = track.vertices
        self._polys: list[FloatArray] = []
        self._plain: list[list[tuple[float, float]]] = []
        for si, sec in enumerate(track.sectors):
            if any(not (0 <= e.start < len(v)) for e in sec.edges) or len(sec.edges) < 3:
                raise TrackError(f"{track.source}: sectors[{si}] is not a usable polygon")
            self._polys.append(np.array([[v[e.start][0], v[e.start][2]] for e in sec.edges]))
            self._plain.append([(v[e.start][0], v[e.start][2]) for e in sec.edges])
        self._neighbors = [
            [e.neighbor for e in sec.edges if e.neighbor is not None and 0 <= e.neighbor < len(track.sectors)]
            for sec in track.sectors
        ]

    def __len__(self) -> int:
        return len(self._polys)

    def polygon(self, index: int) -> FloatArray:
        return self._polys[index]

    def contains(self, index: int, x: float, z: float, *, eps: float = 1e-9) -> bool:
        pts = self._plain[index]
        ax, az = pts[-1]
        for bx, bz in pts:
            # orientation product of the format notes: >= 0 on the inner side of every CCW edge
            if (bz - az) * (x - ax) - (bx - ax) * (z - az) < -eps:
                return False
            ax, az = bx, bz
        return True

    def sector_at(self, x: float, z: float, *, hint: int | None = None) -> int | None:
        """Index of a sector containing (x, z), or None when off the track.

        With ``hint`` (the previous sector) the hint and its neighbors are tried first, which is
        the common case at telemetry rates.
        """
        order: list[int] = []
        if hint is not None and 0 <= hint < len(self._polys):
            order = [hint, *self._neighbors[hint]]
            for i in order:
                if self.contains(i, x, z):
                    return i
        for i in range(len(self._polys)):
            if self.contains(i, x, z):
                return i
        return None
