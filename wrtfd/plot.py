"""Lap plots of a recording: speed, throttle/brake and gear against lap distance (one line per
lap) beside a track map coloured by speed.

matplotlib is an optional extra (``pip install wrtfd[plot]``); it is imported inside the
functions, with the Agg backend, so importing this module costs nothing.

Which channels are plotted for each game: :mod:`wrtfd.driver_channels`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from wrtfd.driver_channels import DriverChannels, driver_channels
from wrtfd.errors import TrackError
from wrtfd.tracks.analysis import SessionLaps, analyse_frames
from wrtfd.tracks.model import Track

if TYPE_CHECKING:
    from wrtfd.tracks.circuit import Circuit

if TYPE_CHECKING:
    from wrtfd.compare import LapTrace

__all__ = ["NO_GNSS_LAPS", "DriverChannels", "driver_channels", "plot_comparison", "plot_session"]

NO_GNSS_LAPS = (
    "this GNSS recording has no lap channels and no known circuit near its first fix;"
    " give --circuit FILE (docs/circuits.md)"
)

FloatArray = npt.NDArray[np.float64]


def _recorded_laps(frames: np.ndarray) -> tuple[npt.NDArray[np.int64], FloatArray]:
    if frames.dtype.names is None or "laps" not in frames.dtype.names:
        raise TrackError("this recording has no lap channels; give --track to detect laps from positions")
    return (
        np.asarray(frames["laps"]["lap_number"], dtype=np.int64),
        np.asarray(frames["laps"]["lap_distance"], dtype=np.float64),
    )


def _label_driver_axes(ax_speed: Any, ax_pedal: Any, ax_gear: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax_speed.set_ylabel("speed (km/h)")
    ax_speed.legend(loc="lower right", fontsize="small")
    ax_pedal.set_ylabel("throttle / -brake")
    ax_pedal.set_ylim(-1.05, 1.05)
    ax_gear.set_ylabel("gear")
    ax_gear.yaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in (ax_speed, ax_pedal, ax_gear):
        ax.grid(True, alpha=0.3)


def _finish(fig: Any, ax_map: Any, output: Path, map_title: str, title: str) -> None:
    """Map axes to scale with Z down (track coordinates), titles, then the PNG."""
    ax_map.set_aspect("equal")
    if not ax_map.yaxis_inverted():
        ax_map.invert_yaxis()
    ax_map.set_title(map_title)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(output, format="png")


def _draw_markers(
    frames: np.ndarray, dist: FloatArray, x: FloatArray, z: FloatArray, ok: Any, ax_speed: Any, ax_map: Any
) -> None:
    """Markers (docs/markers.md): a dotted line at their lap distance, a star on the map."""
    from wrtfd.format.markers import markers_in

    ticks = frames["tick"]
    for k, m in enumerate(markers_in(frames), start=1):
        i = min(int(np.searchsorted(ticks, m.tick, side="left")), len(frames) - 1)
        label = m.note or f"marker {k}"
        if ok[i] and np.isfinite(dist[i]):
            ax_speed.axvline(float(dist[i]), color="red", linestyle=":", linewidth=1.2)
            ax_speed.annotate(
                label,
                (float(dist[i]), 1.0),
                xycoords=("data", "axes fraction"),
                rotation=90,
                va="top",
                ha="right",
                fontsize=8,
                color="red",
            )
            ax_map.plot([x[i]], [z[i]], marker="*", markersize=14, color="red", zorder=5)
            ax_map.annotate(
                label,
                (float(x[i]), float(z[i])),
                fontsize=8,
                color="red",
                xytext=(4, 4),
                textcoords="offset points",
                zorder=5,
            )


def plot_session(
    frames: np.ndarray,
    times_s: npt.ArrayLike,
    output: Path,
    *,
    track: Track | None = None,
    source: str | None = None,
    title: str = "",
    width_px: int = 1600,
    dpi: int = 100,
    circuit: Circuit | None = None,
) -> Path:
    """Write the lap plot of one session to ``output`` (PNG). A GNSS recording (no game
    positions) is timed against ``circuit`` when given (else its recorded lap channels) and
    mapped from its fixes, north up (:mod:`wrtfd.tracks.gnssanalysis`).

    :raises TrackError: no positions/lap channels or no speed channel.
    :raises MissingDependencyError: matplotlib is not installed.
    """
    from wrtfd.compare import map_positions
    from wrtfd.tracks.render import draw_track, require_matplotlib

    plt = require_matplotlib()
    gnss_plane = None
    if track is None and circuit is not None:
        gnss_plane = circuit.plane()
    src, x, z, ok = map_positions(frames, source, gnss_plane)
    if not ok.any():
        raise TrackError("no positions to plot in this session (the car was never driven)")
    from wrtfd.tracks.gnsslaps import has_gnss

    gnss = src is not None and has_gnss(frames, src)
    laps: SessionLaps | None = None
    if track is not None or (gnss and circuit is not None):
        if track is not None:
            laps = analyse_frames(frames, times_s, track, source=src)
        else:
            from wrtfd.tracks.gnssanalysis import gnss_session_analysis

            assert circuit is not None
            laps = gnss_session_analysis(frames, times_s, circuit, source=src)
        lap_no, dist = laps.lap_number, laps.lap_distance_m
        complete = {lap.number for lap in laps.laps}
    else:
        if gnss and "laps" not in (frames.dtype.names or ()):
            raise TrackError(NO_GNSS_LAPS)
        lap_no, dist = _recorded_laps(frames)
        nums = sorted(set(lap_no[ok].tolist()))
        complete = set(nums[1:-1])  # the first (out-lap) and the last (unfinished) are partial
    ch = driver_channels(frames, src)
    show = sorted(complete) or sorted(set(lap_no[ok].tolist()))

    fig = plt.figure(figsize=(width_px / dpi, width_px / dpi * 0.55), dpi=dpi)
    try:
        grid = fig.add_gridspec(3, 2, width_ratios=(1.6, 1.0), height_ratios=(2.0, 1.0, 1.0))
        ax_speed = fig.add_subplot(grid[0, 0])
        ax_pedal = fig.add_subplot(grid[1, 0], sharex=ax_speed)
        ax_gear = fig.add_subplot(grid[2, 0], sharex=ax_speed)
        ax_map = fig.add_subplot(grid[:, 1])
        cmap = plt.get_cmap("viridis")
        for k, n in enumerate(show):
            m = ok & (lap_no == n)
            if not m.any():
                continue
            color = cmap(k / max(1, len(show) - 1))
            d = dist[m]
            order = np.argsort(d, kind="stable")
            label = f"lap {n}" + (
                f" {laps.laps[[lp.number for lp in laps.laps].index(n)].time_s:.3f} s"
                if laps is not None and n in complete
                else ""
            )
            ax_speed.plot(d[order], ch.speed_kmh[m][order], color=color, linewidth=1.0, label=label)
            ax_pedal.plot(d[order], ch.throttle[m][order], color=color, linewidth=0.9)
            ax_pedal.plot(d[order], -ch.brake[m][order], color=color, linewidth=0.9, linestyle="--")
            ax_gear.step(d[order], ch.gear[m][order], color=color, linewidth=0.9, where="post")
        _label_driver_axes(ax_speed, ax_pedal, ax_gear)
        ax_gear.set_xlabel("lap distance (m)")
        if track is not None:
            draw_track(ax_map, track, lanes=False)
        sel = ok & np.isin(lap_no, show)
        sc = ax_map.scatter(x[sel], z[sel], c=ch.speed_kmh[sel], s=4, cmap="plasma", zorder=3)
        _draw_markers(frames, dist, x, z, ok, ax_speed, ax_map)
        fig.colorbar(sc, ax=ax_map, label="speed (km/h)", shrink=0.7)
        _finish(fig, ax_map, output, "track map (coloured by speed)", title)
    finally:
        plt.close(fig)
    return output


def plot_comparison(
    a: LapTrace,
    b: LapTrace,
    output: Path,
    *,
    track: Track | None = None,
    title: str = "",
    width_px: int = 1600,
    dpi: int = 100,
) -> Path:
    """Two laps against lap distance (speed, throttle/brake, gear, time delta) beside the two
    lines on the track map; PNG.

    :raises MissingPlotDependency: matplotlib is not installed.
    """
    from wrtfd.compare import time_delta
    from wrtfd.tracks.laps import format_lap_time
    from wrtfd.tracks.render import draw_track, require_matplotlib

    plt = require_matplotlib()
    grid, delta = time_delta(a, b)
    colors = ("#1f77b4", "#d62728")
    fig = plt.figure(figsize=(width_px / dpi, width_px / dpi * 0.6), dpi=dpi)
    try:
        gs = fig.add_gridspec(4, 2, width_ratios=(1.6, 1.0), height_ratios=(2.0, 1.0, 0.8, 1.2))
        ax_speed = fig.add_subplot(gs[0, 0])
        ax_pedal = fig.add_subplot(gs[1, 0], sharex=ax_speed)
        ax_gear = fig.add_subplot(gs[2, 0], sharex=ax_speed)
        ax_delta = fig.add_subplot(gs[3, 0], sharex=ax_speed)
        ax_map = fig.add_subplot(gs[:, 1])
        for trace, color in zip((a, b), colors, strict=True):
            label = f"{trace.label} lap {trace.lap.number} {format_lap_time(trace.lap.time_s)}"
            d = trace.distance_m
            ax_speed.plot(d, trace.speed_kmh, color=color, linewidth=1.0, label=label)
            ax_pedal.plot(d, trace.throttle, color=color, linewidth=0.9)
            ax_pedal.plot(d, -trace.brake, color=color, linewidth=0.9, linestyle="--")
            ax_gear.step(d, trace.gear, color=color, linewidth=0.9, where="post")
            ax_map.plot(trace.x, trace.z, color=color, linewidth=1.2, label=label, zorder=3)
        ax_delta.plot(grid, delta, color="black", linewidth=1.0)
        ax_delta.axhline(0.0, color="grey", linewidth=0.6)
        ax_delta.fill_between(grid, delta, 0.0, where=delta > 0, color=colors[1], alpha=0.25, linewidth=0)
        ax_delta.fill_between(grid, delta, 0.0, where=delta < 0, color=colors[0], alpha=0.25, linewidth=0)
        _label_driver_axes(ax_speed, ax_pedal, ax_gear)
        ax_delta.set_ylabel("delta (s)\n+ = B behind")
        ax_delta.set_xlabel("lap distance (m)")
        ax_delta.grid(True, alpha=0.3)
        if track is not None:
            draw_track(ax_map, track, lanes=False)
        _finish(fig, ax_map, output, "racing lines", title)
    finally:
        plt.close(fig)
    return output
