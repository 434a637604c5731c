"""What ``wrtfd carla info`` shows: a summary of a recorder file, built in one pass over its frames.

Like CARLA's own ``show_recorder_file_info`` it gives map, date, frames, duration, the actors that
were created and destroyed, parenting and collisions; it adds per-type counts, each actor's
lifetime, the packets that were skipped and the problems found (with byte offsets).
Dates are shown in UTC (CARLA shows server local time), so the output does not depend on the host.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from wrtfd.carla.model import (
    ActorAdd,
    Collision,
    Frame,
    InfoHeader,
    ReadProblem,
    actor_type_name,
)

__all__ = ["ActorLife", "CollisionAt", "Summary", "format_summary", "summarize"]


@dataclass(slots=True)
class ActorLife:
    """One actor from its EventAdd to its EventDel (``deleted_*`` None: alive at the end)."""

    add: ActorAdd
    created_frame: int
    created_s: float
    deleted_frame: int | None = None
    deleted_s: float | None = None
    parent_id: int | None = None


@dataclass(frozen=True, slots=True)
class CollisionAt:
    frame_id: int
    elapsed_s: float
    collision: Collision


@dataclass(slots=True)
class Summary:
    header: InfoHeader
    frame_count: int = 0
    first_frame_id: int | None = None
    last_frame_id: int | None = None
    duration_s: float = 0.0
    actors: list[ActorLife] = field(default_factory=list)
    collisions: list[CollisionAt] = field(default_factory=list)
    # (frame id, elapsed, text) for --events, in file order
    events: list[tuple[int, float, str]] = field(default_factory=list)
    unknown_packets: dict[int, int] = field(default_factory=dict)
    problems: list[ReadProblem] = field(default_factory=list)
    problem_counts: dict[str, int] = field(default_factory=dict)

    def by_type(self) -> dict[int, list[ActorLife]]:
        out: dict[int, list[ActorLife]] = {}
        for life in self.actors:
            out.setdefault(life.add.actor_type, []).append(life)
        return dict(sorted(out.items()))


def summarize(header: InfoHeader, frames: Iterable[Frame]) -> Summary:
    """One pass over ``frames``; keeps events, not positions."""
    s = Summary(header=header)
    alive: dict[int, ActorLife] = {}
    last: Frame | None = None
    for frame in frames:
        s.frame_count += 1
        if s.first_frame_id is None:
            s.first_frame_id = frame.frame_id
        fid, t = frame.frame_id, frame.elapsed_s
        for add in frame.adds:
            old = alive.pop(add.actor_id, None)
            if old is not None:  # re-created without a delete: close the old life here
                old.deleted_frame, old.deleted_s = fid, t
            life = ActorLife(add, fid, t)
            alive[add.actor_id] = life
            s.actors.append(life)
            loc = ", ".join(f"{v:g}" for v in add.location_cm)
            text = f"Create {add.actor_id}: {add.description_id} ({add.actor_type}) at ({loc})"
            text += "".join(f"\n  {a.id} = {a.value}" for a in add.attributes)
            s.events.append((fid, t, text))
        for actor_id in frame.deletes:
            gone = alive.pop(actor_id, None)
            if gone is not None:
                gone.deleted_frame, gone.deleted_s = fid, t
            s.events.append((fid, t, f"Destroy {actor_id}"))
        for p in frame.parents:
            child = alive.get(p.child_id)
            if child is not None:
                child.parent_id = p.parent_id
            s.events.append((fid, t, f"Parenting {p.child_id} with {p.parent_id} (parent)"))
        for c in frame.collisions:
            s.collisions.append(CollisionAt(fid, t, c))
            s.events.append((fid, t, _collision_text(c)))
        last = frame
    if last is not None:
        s.last_frame_id = last.frame_id
        s.duration_s = last.elapsed_s + (last.duration_s or 0.0)
    return s


def _collision_text(c: Collision) -> str:
    a1 = f"{c.actor1_id} (hero)" if c.actor1_is_hero else str(c.actor1_id)
    a2 = f"{c.actor2_id} (hero)" if c.actor2_is_hero else str(c.actor2_id)
    return f"Collision id {c.collision_id} between {a1} and {a2}"


def _when(frame: int | None, t: float | None) -> str:
    return "end" if frame is None or t is None else f"{t:.3f} s (frame {frame})"


def format_summary(s: Summary, *, events: bool = False) -> list[str]:
    """The lines ``wrtfd carla info`` prints."""
    h = s.header
    date = h.date_utc
    lines = [
        f"Version: {h.version}",
        f"Map: {h.map_name}",
        f"Date: {date.strftime('%Y-%m-%d %H:%M:%S UTC') if date else '?'} ({h.date_s} s since 1970)",
        f"Frames: {s.frame_count}"
        + (f" (ids {s.first_frame_id}-{s.last_frame_id})" if s.first_frame_id is not None else ""),
        f"Duration: {s.duration_s:.3f} s",
        f"Actors: {len(s.actors)}",
    ]
    for actor_type, lives in s.by_type().items():
        lines.append(f"  {actor_type_name(actor_type)} ({actor_type}): {len(lives)}")
        for life in lives:
            a = life.add
            role = a.attribute("role_name")
            extra = f" role_name={role}" if role else ""
            if life.parent_id is not None:
                extra += f" parent={life.parent_id}"
            born = _when(life.created_frame, life.created_s)
            died = _when(life.deleted_frame, life.deleted_s)
            lines.append(
                f"    {a.actor_id:>6} {a.description_id} [uid {a.description_uid}]{extra}  {born} -> {died}"
            )
    lines.append(f"Collisions: {len(s.collisions)}")
    for c in s.collisions:
        lines.append(f"  frame {c.frame_id} at {c.elapsed_s:.3f} s: {_collision_text(c.collision)}")
    if s.unknown_packets:
        skipped = ", ".join(f"id {pid} x{n}" for pid, n in s.unknown_packets.items())
        lines.append(f"Skipped packets: {skipped}")
    total = sum(s.problem_counts.values())
    lines.append(f"Problems: {total}")
    for p in s.problems:
        lines.append(f"  {p}")
    if total > len(s.problems):
        lines.append(f"  ... {total - len(s.problems)} more")
    if events:
        lines.append("Events:")
        shown: int | None = None
        for fid, t, text in s.events:
            if fid != shown:
                lines.append(f"Frame {fid} at {t:g} seconds")
                shown = fid
            first, *attrs = text.split("\n")
            lines.append(f" {first}")
            lines.extend(attrs)
    return lines
