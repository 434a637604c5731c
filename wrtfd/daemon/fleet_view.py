"""Terminal views of the fleet: ``wrtfd watch`` (every rig live) and ``wrtfd fleet status``.

Pure: rows or status documents in, rich renderables out (plain text in a pipe, colour only on
a terminal, as ``wrtfd status`` does). Values come from other machines: each is read
defensively and shows as ``-`` when missing or odd.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from wrtfd.daemon.status_view import format_age, format_bytes, format_lap
from wrtfd.fleet.watch import Row

__all__ = ["render_fleet_status", "render_watch"]

_STYLE = {
    "recording": "green",
    "idle": "yellow",
    "offline": "dim",
    "connected": "green",
    "connecting": "yellow",
    "disconnected": "red",
    "refused": "bold red",
    "failed": "bold red",
}


def _table(*columns: str) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", expand=False)
    for name in columns:
        table.add_column(name, no_wrap=True)
    return table


def _styled(value: object) -> Text:
    text = str(value) if value is not None else "-"
    return Text(text, style=_STYLE.get(text, ""))


def _num(value: object, fmt: str = "{:,.0f}") -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    return fmt.format(value)


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def render_watch(rows: Sequence[Row], *, stamp: str = "") -> RenderableType:
    """The live table of every rig and group."""
    table = _table(
        "RIG", "GROUP", "STATE", "SPEED", "GEAR", "LAP", "LAST LAP", "BEST LAP", "UPLOADS", "LINK", "SEEN"
    )
    for r in rows:
        uploads = "-"
        if r.uploads_queued is not None:
            uploads = f"{r.uploads_queued} queued"
            if r.uploads_queued:
                uploads += f" ({format_bytes(r.uploads_bytes)})"
        table.add_row(
            r.rig,
            r.group,
            _styled(r.state),
            _num(r.speed_kmh, "{:.0f} km/h") if r.state != "offline" else "-",
            _num(r.gear, "{:d}") if r.state != "offline" else "-",
            _num(r.lap, "{:d}"),
            format_lap(r.last_lap_ms),
            format_lap(r.best_lap_ms),
            uploads,
            _styled(r.link),
            format_age(r.seen_s),
        )
    head = Text(
        f"wrtfd fleet: {len({r.rig for r in rows})} rig(s)" + (f"  {stamp}" if stamp else ""), style="bold"
    )
    if not rows:
        return Group(head, Text("no rig has published yet", style="dim"))
    return Group(head, table)


def render_fleet_status(
    rigs: Mapping[str, tuple[Mapping[str, Any], float | None]], *, url: str
) -> RenderableType:
    """``wrtfd fleet status``: one row per rig from its last status (and how old it is)."""
    table = _table(
        "RIG", "STATE", "RECORDING", "UPLOADS", "BACKLOG", "DONE", "LIVE DROPS", "LINK", "SEEN", "ERROR"
    )
    for name in sorted(rigs):
        doc, age_s = rigs[name]
        fleet = _map(doc.get("fleet"))
        uploads = _map(fleet.get("uploads"))
        interval = doc.get("status_interval_s")
        interval_s = (
            float(interval) if isinstance(interval, int | float) and not isinstance(interval, bool) else 2.0
        )
        state = doc.get("state")
        if age_s is None or age_s > 3 * max(interval_s, 2.0) or state == "stopped":
            state = "offline"
        recording = [g for g, v in _map(doc.get("groups")).items() if _map(v).get("in_session")]
        error = fleet.get("last_error") or uploads.get("last_error") or ""
        problems = doc.get("problems")
        if isinstance(problems, list) and problems:
            error = "; ".join(str(p) for p in problems[:2]) + (f"; {error}" if error else "")
        table.add_row(
            name,
            _styled(state),
            ", ".join(recording) or "-",
            _num(uploads.get("queued")),
            format_bytes(uploads.get("queued_bytes")),
            _num(uploads.get("done")),
            _num(_map(fleet.get("live")).get("dropped_total")),
            _styled(fleet.get("state")),
            format_age(age_s),
            str(error)[:80],
        )
    head = Text(f"wrtfd fleet at {url}: {len(rigs)} rig(s)", style="bold")
    if not rigs:
        return Group(head, Text("no rig has published a status yet", style="dim"))
    return Group(head, table)
