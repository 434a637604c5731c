"""Draw a track map: sectors, walls, lanes and the start/finish line (matplotlib, Agg).

matplotlib is an optional extra; :func:`require_matplotlib` gives the one-line error the CLI shows.
The map is drawn as seen from above with X to the right and Z down the screen, the orientation
in which the format's "counter-clockwise" is defined.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from wrtfd._optional import missing_dependency
from wrtfd.tracks.geometry import LanePath
from wrtfd.tracks.model import Track

__all__ = ["draw_track", "lane_polyline", "render_track", "require_matplotlib"]


def require_matplotlib() -> Any:
    """Import matplotlib with the Agg backend, or raise a one-line error naming the extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise missing_dependency("matplotlib", extra="plot", purpose="plotting") from exc
    return plt


def lane_polyline(path: LanePath, step_m: float = 1.0) -> np.ndarray:
    """(N, 2) x/z points along a lane, closed (the last point repeats the first)."""
    n = max(8, int(path.length_m / step_m))
    pts = [path.point_at(path.length_m * i / n) for i in range(n + 1)]
    return np.array([[p[0], p[2]] for p in pts])


def draw_track(ax: Any, track: Track, *, lanes: bool = True, sectors: bool = True) -> None:
    """Draw ``track`` onto matplotlib axes ``ax`` (Z grows downwards, equal scale)."""
    from matplotlib.patches import Polygon

    v = track.vertices
    nv = len(v)
    for sec in track.sectors:
        if any(not (0 <= e.start < nv) for e in sec.edges) or len(sec.edges) < 3:
            continue
        pts = [(v[e.start][0], v[e.start][2]) for e in sec.edges]
        if sectors:
            ax.add_patch(Polygon(pts, closed=True, facecolor="#e8e8e8", edgecolor="#bbbbbb", linewidth=0.4))
        for i, e in enumerate(sec.edges):
            if e.kind == "wall":
                a, b = pts[i], pts[(i + 1) % len(pts)]
                ax.plot([a[0], b[0]], [a[1], b[1]], color="black", linewidth=1.2)
    if lanes:
        colors = ["tab:blue", "tab:orange", "tab:green", "tab:purple"]
        for li in range(len(track.lanes)):
            poly = lane_polyline(LanePath(track, li))
            ax.plot(poly[:, 0], poly[:, 1], color=colors[li % len(colors)], linewidth=1.0, label=f"lane {li}")
    _draw_start(ax, track)
    ax.set_aspect("equal")
    if not ax.yaxis_inverted():
        ax.invert_yaxis()
    ax.set_xlabel("x (m)")
    ax.set_ylabel("z (m)")


def _draw_start(ax: Any, track: Track) -> None:
    if not track.lanes:
        return
    path = LanePath(track, 0)
    x, _, z = path.point_at(0.0)
    fx, fz = path.heading_at(0.0)
    rx, rz = -fz, fx
    half = 0.04 * max(path.length_m / 6.28, 10.0)
    ax.plot(
        [x - half * rx, x + half * rx],
        [z - half * rz, z + half * rz],
        color="red",
        linewidth=2.5,
        label="start/finish",
    )
    ax.annotate(
        "", xy=(x + half * fx, z + half * fz), xytext=(x, z), arrowprops={"arrowstyle": "->", "color": "red"}
    )


def render_track(track: Track, output: Path, *, width_px: int = 1200, dpi: int = 100) -> Path:
    """Write a PNG map of ``track`` to ``output``."""
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(width_px / dpi, width_px / dpi * 0.8), dpi=dpi)
    try:
        draw_track(ax, track)
        ax.set_title(f"{track.name}" + (f" (rev {track.revision})" if track.revision else ""))
        ax.legend(loc="best", fontsize="small")
        fig.tight_layout()
        fig.savefig(output, format="png")
    finally:
        plt.close(fig)
    return output
