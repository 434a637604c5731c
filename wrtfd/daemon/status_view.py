"""The terminal view of a ``/status`` snapshot (``wrtfd status``), like ``systemctl status``.

Pure: a snapshot dict in, rich renderables out; the command decides where they go. Colour is
the console's business (rich enables it only on a terminal and honours ``NO_COLOR``), so the
same text reads the same in a pipe. The snapshot comes from the network: every value is read
defensively (a missing or odd key shows as ``-``, never a traceback).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = [
    "fleet_line",
    "format_age",
    "format_bytes",
    "format_duration",
    "format_lap",
    "reference_line",
    "render_status",
]

_STATE_STYLE = {
    "receiving": "green",
    "listening": "yellow",
    "starting": "yellow",
    "reconnecting": "red",
    "failed": "bold red",
    "stopped": "dim",
    "ok": "green",
    "stalled": "bold red",
    "failing": "bold red",
}


#: A column narrower than this would break its header in the middle of short words.
_MIN_COLUMN = 8
#: Wider than any console: the width a table would take if it had all the room it wants.
_UNBOUNDED = 1 << 16
#: The width of the labels before the facts (``  config``, ``  daemon``, ...).
_LABEL_WIDTH = 8


def format_bytes(value: object) -> str:
    """``2.0 KiB``; ``-`` for anything but a finite number from 0 to 2**70 (a JSON integer of
    400 digits included: ``float()`` of it raises OverflowError)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1 << 70:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return "-"  # unreachable


def format_duration(seconds: object) -> str:
    """``3 s``, ``4 min 05 s``, ``2 h 03 min``, ``3 d 04 h``."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not 0 <= seconds < 1e12:
        return "-"  # not a duration (NaN and infinity included: hostile or broken JSON)
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600:02d} h"


def format_age(seconds: object) -> str:
    if seconds is None:
        return "never"
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not abs(seconds) < 1e12:
        return "-"
    return f"{seconds:.1f} s ago" if seconds < 60 else f"{format_duration(seconds)} ago"


def format_lap(ms: object) -> str:
    """``1:23.456`` from milliseconds; ``-`` for none (0)."""
    if not isinstance(ms, int) or isinstance(ms, bool) or ms <= 0:
        return "-"
    minutes, rest = divmod(ms, 60_000)
    return f"{minutes}:{rest // 1000:02d}.{rest % 1000:03d}"


def _count(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not abs(value) < 1e18:
        return "-"  # NaN, infinities and integers of 400 digits included
    return f"{value:,.0f}"


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _state(value: object) -> Text:
    text = str(value) if value is not None else "-"
    return Text(text, style=_STATE_STYLE.get(text, ""))


def _table(columns: Sequence[str], *, wrap: tuple[str, ...] = ()) -> Table:
    """A borderless table: the ``wrap`` columns (free text) wrap, long words folded, when the
    console is narrower than the table; the others (names, states, numbers) stay on one line."""
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", expand=False)
    for name in columns:
        if name in wrap:
            table.add_column(name, overflow="fold", min_width=min(len(name), _MIN_COLUMN))
        else:
            table.add_column(name, no_wrap=True, overflow="fold")
    return table


class _Fitted:
    """A table that fits the console's width: whole when it fits; else without its ``free``
    column (free text: a file name, a detail), which follows the table as one wrapped line per
    row (``  name detail: text``), the ``wrap`` columns wrapping; narrower still, one wrapped
    line per row. Nothing is cut, and no column is squeezed to a few letters."""

    def __init__(
        self,
        columns: Sequence[str],
        rows: list[list[RenderableType]],
        *,
        free: str,
        wrap: tuple[str, ...] = (),
    ) -> None:
        self.columns = list(columns)
        self.rows = rows
        self.free = self.columns.index(free)
        self.wrap = wrap

    def _table(self, *, whole: bool) -> Table:
        keep = [i for i in range(len(self.columns)) if whole or i != self.free]
        table = _table([self.columns[i] for i in keep], wrap=(*self.wrap, self.columns[self.free]))
        for cells in self.rows:
            table.add_row(*(cells[i] for i in keep))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        whole = self._table(whole=True)
        unbounded = options.update(width=_UNBOUNDED, max_width=_UNBOUNDED)
        if Measurement.get(console, unbounded, whole).maximum <= options.max_width:
            yield whole
            return
        compact = self._table(whole=False)
        if _minimum_width(compact, console, unbounded) <= options.max_width:
            yield compact
            label = self.columns[self.free].lower()
            for cells in self.rows:
                text = _plain(cells[self.free])
                if text and text != "-":
                    yield Text(f"  {_plain(cells[0])} {label}: {text}", overflow="fold")
            return
        # Narrower still: one wrapped line per row, every column named.
        for cells in self.rows:
            named = ", ".join(
                f"{col.lower()} {_plain(cell)}" for col, cell in zip(self.columns[1:], cells[1:], strict=True)
            )
            yield Text(f"{_plain(cells[0])}: {named}", overflow="fold")


def _plain(cell: RenderableType) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _minimum_width(table: Table, console: Console, options: ConsoleOptions) -> int:
    """The narrowest the table can be without cutting a no-wrap cell: their widest cells, the
    wrap columns' minimum, and the gaps between columns."""
    widths = [Measurement.get(console, options, column.header).maximum for column in table.columns]
    for i, column in enumerate(table.columns):
        for cell in column.cells:
            need = Measurement.get(console, options, cell)
            widths[i] = max(widths[i], need.maximum if column.no_wrap else need.minimum)
        if column.min_width is not None:
            widths[i] = max(widths[i], column.min_width)
    return sum(widths) + 2 * (len(widths) - 1)


def _groups(rec: Mapping[str, Any]) -> _Fitted:
    rows: list[list[RenderableType]] = []
    groups = _map(rec.get("groups")) or {"main": rec}
    for name, raw in groups.items():
        g = _map(raw)
        file = g.get("file")
        laps = _map(_map(g.get("derived")).get("laps"))
        best = format_lap(laps.get("best_lap_ms"))
        if best != "-":
            best += f" (lap {laps.get('best_lap_number')})"
        session = g.get("session")
        rate = g.get("frame_rate_hz")
        cells: list[RenderableType] = [
            str(name),
            _state(g.get("state")),
            PurePath(str(file)).name if file else "-",
            format_bytes(g.get("bytes")) if file else "-",
            f"#{session}" if g.get("in_session") and isinstance(session, int) else "-",
            _count(g.get("session_frames") if g.get("in_session") else g.get("frames")),
            f"{rate:.0f}/s" if isinstance(rate, int | float) else "-",
            _count(g.get("dropped_ticks")),
            _count(laps.get("lap_count")) if laps else "-",
            best,
        ]
        rows.append(cells)
    columns = ("GROUP", "STATE", "FILE", "SIZE", "SESSION", "FRAMES", "RATE", "DROPPED", "LAPS", "BEST LAP")
    return _Fitted(columns, rows, free="FILE", wrap=("BEST LAP",))


def _sources(sources: Mapping[str, Any]) -> _Fitted:
    rows: list[list[RenderableType]] = []
    for name, raw in sources.items():
        s = _map(raw)
        dropped = _map(s.get("dropped"))
        drop_text = _count(s.get("dropped_total"))
        if dropped:
            worst = max(dropped.items(), key=lambda kv: kv[1] if isinstance(kv[1], int) else 0)
            drop_text += f" ({worst[0]}: {_count(worst[1])})" if len(dropped) == 1 else f" (most {worst[0]})"
        rate = s.get("rate_hz")
        detail = str(s.get("detail") or "")
        if s.get("required"):
            detail = f"required; {detail}" if detail else "required"
        restarts = s.get("restarts")
        if isinstance(restarts, int) and restarts:
            detail += f"; {restarts} restart(s)"
        cells: list[RenderableType] = [
            str(name),
            f"{s.get('kind', '-')}/{s.get('protocol', '-')}",
            _state(s.get("state")),
            f"{rate:.1f} Hz" if isinstance(rate, int | float) else "-",
            _count(s.get("samples")),
            drop_text,
            format_age(s.get("last_sample_age_s")),
            detail,
        ]
        rows.append(cells)
    columns = ("SOURCE", "PROTOCOL", "STATE", "RATE", "SAMPLES", "DROPPED", "LAST SAMPLE", "DETAIL")
    return _Fitted(columns, rows, free="DETAIL", wrap=("DROPPED", "LAST SAMPLE"))


def _disk(disk: Mapping[str, Any]) -> str:
    where = str(disk.get("path", "-"))
    if disk.get("error"):
        return f"{where}: {disk['error']}"
    text = f"{where}: {format_bytes(disk.get('free_bytes'))} free of {format_bytes(disk.get('total_bytes'))}"
    minimum = disk.get("min_free_bytes")
    if isinstance(minimum, int) and minimum:
        text += f" (minimum {format_bytes(minimum)})"
    return text


def _num(value: object, fmt: str = "{:,.0f}") -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    return fmt.format(value)


def fleet_line(fleet: Mapping[str, Any]) -> str:
    """One line about the fleet link (``[fleet]``): state, error, upload backlog, live drops."""
    uploads = _map(fleet.get("uploads"))
    live = _map(fleet.get("live"))
    head = f"{fleet.get('url', '-')} as rig {fleet.get('rig', '-')}: {fleet.get('state', '-')}"
    if fleet.get("state") != "connected" and fleet.get("last_error"):
        head += f" ({fleet['last_error']})"
    parts = [head]
    if uploads.get("enabled", True):
        text = f"uploads {_num(uploads.get('queued'))} queued ({format_bytes(uploads.get('queued_bytes'))})"
        text += f", {_num(uploads.get('done'))} done"
        current = _map(uploads.get("current"))
        if current:
            text += f", sending {current.get('object', '-')} {format_bytes(current.get('sent_bytes'))}"
            text += f" of {format_bytes(current.get('size'))}"
        parts.append(text)
    if live:
        parts.append(
            f"live {_num(live.get('hz'), '{:g}')} Hz, {_num(live.get('dropped_total'))} frames dropped"
        )
    return "; ".join(parts)


def reference_line(ref: Mapping[str, Any]) -> str:
    """One line about a source whose delta follows the team's best lap (``reference = "fleet:..."``)."""
    head = f"{ref.get('source', '-')} {ref.get('reference', '-')}"
    if ref.get("lap_time_s") is None:
        text = f"{head}: the session's best lap until the team's is fetched"
    else:
        who = ref.get("driver") or f"({ref.get('rig', '?')})"
        text = f"{head}: {who} on {ref.get('rig', '-')} lap {_num(ref.get('lap'))}"
        text += f", {_num(ref.get('lap_time_s'), '{:.3f}')} s ({ref.get('state', '-')})"
    if ref.get("error"):
        text += f"; {ref['error']}"
    return text


def render_status(snapshot: Mapping[str, Any], *, url: str, unicode: bool = True) -> RenderableType:
    """Everything ``wrtfd status`` shows for one snapshot."""
    healthy = bool(snapshot.get("healthy"))
    problems = [str(p) for p in snapshot.get("problems") or [] if p]
    dot = "●" if unicode else "*"
    head = Text.assemble(
        (dot + " ", "bold green" if healthy and not problems else "bold red"),
        (f"wrtfd {snapshot.get('version', '?')}", "bold"),
        ": ",
        ("healthy", "green")
        if healthy and not problems
        else (f"unhealthy ({len(problems)} problem(s))", "red"),
    )
    facts = Table(box=None, pad_edge=False, show_edge=False, show_header=False, expand=False)
    facts.add_column(no_wrap=True, min_width=_LABEL_WIDTH)  # a label is never cut
    facts.add_column(overflow="fold")  # a long value wraps under itself
    facts.add_row("  config", Text(str(snapshot.get("config", "-"))))
    facts.add_row(
        "  daemon",
        f"pid {snapshot.get('pid', '-')}, up {format_duration(snapshot.get('uptime_s'))}, status {url}",
    )
    facts.add_row("  disk", _disk(_map(snapshot.get("disk"))))
    fleet = snapshot.get("fleet")
    if isinstance(fleet, Mapping):
        facts.add_row(
            "  fleet", Text(fleet_line(fleet), style="" if fleet.get("state") == "connected" else "red")
        )
        refs = fleet.get("references")
        for ref in refs if isinstance(refs, list) else ():
            if isinstance(ref, Mapping):
                # names another rig chose (the driver): plain text, never markup
                facts.add_row("  reference", Text(reference_line(ref)))
    parts: list[RenderableType] = [head, facts, Text(""), _groups(_map(snapshot.get("recorder")))]
    parts += [Text(""), _sources(_map(snapshot.get("sources")))]
    if problems:
        parts.append(Text(""))
        parts.append(Text("PROBLEMS", style="bold"))
        mark = "✗" if unicode else "x"
        parts += [Text(f"{mark} {p}", style="red") for p in problems]
    return Group(*parts)
