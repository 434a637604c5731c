"""Terminal views of the fleet: ``wrtfd watch`` (every rig live) and ``wrtfd fleet status``.

Pure: rows or status documents in, rich renderables out (plain text in a pipe, colour only on
a terminal, as ``wrtfd status`` does). Values come from other machines: each is read
defensively and shows as ``-`` when missing or odd (a number of 400 digits included), and every
name or text from them goes into the table as a :class:`~rich.text.Text`, never as markup
(``[/]`` in a rig's name is shown as written, not parsed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from wrtfd.daemon.status_view import format_age, format_bytes, format_lap
from wrtfd.fleet import untrusted
from wrtfd.fleet.watch import Row, StatusSummary, is_offline, summarize_status

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
    number = untrusted.number(value, -1e15, 1e15)
    if number is None:
        return "-"
    return fmt.format(int(number) if fmt.endswith("d}") else number)


def render_watch(rows: Sequence[Row], *, stamp: str = "", dropped: int = 0) -> RenderableType:
    """The live table of every rig and group; ``dropped``: messages refused so far (malformed,
    or from a rig that made room for another), said in the head line when there are any."""
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
            Text(r.rig),
            Text(r.group),
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
        f"wrtfd fleet: {len({r.rig for r in rows})} rig(s)"
        + (f"  {stamp}" if stamp else "")
        + (f"  ({dropped:,} message(s) dropped)" if dropped else ""),
        style="bold",
    )
    if not rows:
        return Group(head, Text("no rig has published yet", style="dim"))
    return Group(head, table)


def render_fleet_status(
    rigs: Mapping[str, tuple[Mapping[str, Any] | StatusSummary, float | None]], *, url: str, left_out: int = 0
) -> RenderableType:
    """``wrtfd fleet status``: one row per rig from its last status (a document, or its
    :func:`~wrtfd.fleet.watch.summarize_status`) and how old it is; ``left_out``: rigs not shown
    (beyond :data:`~wrtfd.fleet.watch.MAX_RIGS`, those heard from least recently)."""
    table = _table(
        "RIG", "STATE", "RECORDING", "UPLOADS", "BACKLOG", "DONE", "LIVE DROPS", "LINK", "SEEN", "ERROR"
    )
    for name in sorted(rigs):
        doc, age_s = rigs[name]
        status = doc if isinstance(doc, StatusSummary) else summarize_status(doc)
        recording = [g for g, v in status.groups.items() if v.in_session]
        error = "; ".join([*status.problems[:2], *([status.last_error] if status.last_error else [])])
        table.add_row(
            Text(name),
            _styled("offline" if is_offline(status, age_s) else status.state),
            Text(", ".join(recording) + (", ..." if status.groups_cut else "") or "-"),
            _num(status.uploads_queued),
            format_bytes(status.uploads_bytes),
            _num(status.uploads_done),
            _num(status.live_dropped),
            _styled(status.link),
            format_age(age_s),
            Text(error[:80]),
        )
    more = f" ({left_out:,} more heard from longer ago not shown)" if left_out else ""
    head = Text(f"wrtfd fleet at {url}: {len(rigs)} rig(s){more}", style="bold")
    if not rigs:
        return Group(head, Text("no rig has published a status yet", style="dim"))
    return Group(head, table)
