"""``wrtfd import FILE.log --format carla``: a CARLA recorder file -> one WRTF file.

The recording is replayed through the same recorder as live data, in virtual time: each CARLA
frame becomes one :class:`~wrtfd.decoders.base.Sample` of source ``carla`` stamped with CARLA's
elapsed seconds, and the scheduler turns those into frames at ``--rate`` (default: the rate of the
recording's median frame duration). The file is read twice: a quick pass over the events (actors,
lifetimes, frame times) to choose the actor, the rate and the metadata, then the full pass.

The output is written to a temporary file beside ``-o`` and renamed into place when complete, so
a failed import never leaves a half-written OUT. With the same input and ``--start-timestamp`` (the
default is the recording's own date) the output is byte for byte the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from wrtfd.carla.channels import (
    SOURCE_NAME,
    AllVehiclesChannels,
    SingleActorChannels,
    all_vehicles_definition,
    resolve_actor,
    single_actor_definition,
)
from wrtfd.carla.info import Summary, summarize
from wrtfd.carla.model import Frame, actor_type_name
from wrtfd.carla.reader import EVENT_PACKETS, FrameStream, open_recording
from wrtfd.decoders.base import Sample
from wrtfd.errors import ImportFormatError
from wrtfd.importers.output import check_output, replay_into_file

__all__ = [
    "ALL_VEHICLES",
    "DEFAULT_RATE_HZ",
    "ImportResult",
    "import_recording",
    "median_rate_hz",
    "run_import",
]

ALL_VEHICLES = "all-vehicles"
#: Used when the recording has fewer than two frames (no frame duration to go by).
DEFAULT_RATE_HZ = 20
#: CARLA elapsed times beyond this (a year) are corrupt, not a long simulation.
MAX_ELAPSED_S = 365 * 86400.0
#: Slots above this make frames of hundreds of kilobytes: refuse rather than write absurd files.
MAX_VEHICLE_SLOTS = 4096


class ImportResult:
    """What an import did: for the command's report and for tests."""

    __slots__ = ("dropped_frames", "frames_in", "output", "problems", "rate_hz", "samples", "summary")

    def __init__(self) -> None:
        self.output = Path()
        self.rate_hz = 0
        self.frames_in = 0
        self.samples = 0
        self.dropped_frames = 0  # elapsed negative, absurd, or not after the previous frame's
        self.problems: list[str] = []
        self.summary: Summary | None = None


def median_rate_hz(elapsed_s: list[float]) -> int:
    """Frame rate of the median frame-to-frame time, rounded to whole Hz (at least 1)."""
    if len(elapsed_s) < 2:
        return DEFAULT_RATE_HZ
    diffs = np.diff(np.asarray(elapsed_s, dtype=np.float64))
    diffs = diffs[diffs > 0]
    if not len(diffs):
        return DEFAULT_RATE_HZ
    return max(1, round(1.0 / float(np.median(diffs))))


def _actor_metadata(summary: Summary) -> str:
    """Every actor with its description, attributes and lifetime, as JSON (one metadata value)."""
    out = []
    for life in summary.actors:
        a = life.add
        out.append(
            {
                "id": a.actor_id,
                "type": a.actor_type,
                "type_name": actor_type_name(a.actor_type),
                "description_id": a.description_id,
                "description_uid": a.description_uid,
                "attributes": {attr.id: attr.value for attr in a.attributes},
                "created_frame": life.created_frame,
                "created_s": life.created_s,
                "deleted_frame": life.deleted_frame,
                "deleted_s": life.deleted_s,
                "parent_id": life.parent_id,
            }
        )
    return json.dumps(out, separators=(",", ":"), sort_keys=True)


def _samples(
    stream: FrameStream,
    channels: Any,
    result: ImportResult,
    total: int,
    progress: bool,
    info: Mapping[str, str],
) -> Iterator[Sample]:
    last_ns: int | None = None
    for frame in stream:
        result.frames_in += 1
        if progress and result.frames_in % 2000 == 0:
            sys.stderr.write(f"\rimporting frame {result.frames_in}/{total}")
        values = channels.update(frame)  # always: its events change the state
        if not 0.0 <= frame.elapsed_s <= MAX_ELAPSED_S:
            result.dropped_frames += 1
            continue
        ns = round(frame.elapsed_s * 1e9)
        if last_ns is not None and ns <= last_ns:
            result.dropped_frames += 1
            continue
        if values is None:
            continue
        last_ns = ns
        result.samples += 1
        yield Sample(source=SOURCE_NAME, rx_ns=ns, values=values, source_time_ns=ns, session_info=info)
    if progress:
        sys.stderr.write("\r\x1b[K")


def _frame_times(stream: FrameStream) -> tuple[Summary, list[float]]:
    times: list[float] = []

    def frames() -> Iterator[Frame]:
        for frame in stream:
            times.append(frame.elapsed_s)
            yield frame

    return summarize(stream.header, frames()), times


def import_recording(
    path: Path,
    output: Path,
    *,
    actor: str = "hero",
    max_vehicles: int = 64,
    rate_hz: int | None = None,
    track: Path | None = None,
    start_timestamp_us: int | None = None,
    force: bool = False,
    progress: bool = False,
) -> ImportResult:
    """Import ``path`` into ``output``; see the module docstring.

    :raises ImportFormatError: unreadable recording, unknown actor, bad option.
    :raises WrtfdError: from the recorder or the track loader.
    :raises OSError: reading the input or writing the output.
    """
    check_output(output, force=force)
    if rate_hz is not None and rate_hz <= 0:
        raise ImportFormatError(f"--rate must be a positive number of Hz, not {rate_hz}")
    all_vehicles = actor == ALL_VEHICLES
    if all_vehicles and not 1 <= max_vehicles <= MAX_VEHICLE_SLOTS:
        raise ImportFormatError(
            f"--max-vehicles must be between 1 and {MAX_VEHICLE_SLOTS}, not {max_vehicles}"
        )
    if track is not None and all_vehicles:
        raise ImportFormatError("--track works with one actor (--actor hero|ID), not all-vehicles")
    from wrtfd.recorder import SourceSpec

    result = ImportResult()
    result.output = output
    with open_recording(path) as first:
        scan = first.again(decode=EVENT_PACKETS)
        summary, times = _frame_times(scan)
        result.summary = summary
        if not times:
            raise ImportFormatError(f"{path}: no complete frame to import")
        rate = rate_hz or median_rate_hz(times)
        result.rate_hz = rate
        header = first.header
        metadata = {
            "Track": header.map_name,
            "carla.map": header.map_name,
            "carla.date_s": str(header.date_s),
            "carla.date": header.date_utc.isoformat() if header.date_utc else "",
            "carla.file": path.name,
            "carla.frames": str(len(times)),
            "carla.duration_s": repr(summary.duration_s),
            "carla.units": "locations m (recorded in cm), rotations deg (roll=X pitch=Y yaw=Z), speeds m/s",
            "carla.actors": _actor_metadata(summary),
        }
        if all_vehicles:
            definition = all_vehicles_definition(max_vehicles)
            channels: Any = AllVehiclesChannels(max_vehicles)
            metadata["carla.actor"] = ALL_VEHICLES
            info = {"track": header.map_name, "car": ALL_VEHICLES}
            metadata["carla.max_vehicles"] = str(max_vehicles)
        else:
            try:
                actor_id = resolve_actor(actor, (life.add for life in summary.actors))
            except LookupError as exc:
                raise ImportFormatError(f"{path}: {exc}") from None
            definition = single_actor_definition()
            channels = SingleActorChannels(actor_id)
            metadata["carla.actor"] = str(actor_id)
            chosen = next(life.add for life in summary.actors if life.add.actor_id == actor_id)
            metadata["carla.actor_description"] = chosen.description_id
            metadata["Car"] = chosen.description_id
            info = {"track": header.map_name, "car": chosen.description_id}
        derived = _lap_channels(track) if track is not None else []
        # The scheduler centres the first frame in tick 0, so the file starts half a tick before
        # CARLA's elapsed 0: the start must leave room for that (and stay a valid uint64).
        min_start_us = -(-1_000_000 // rate)
        if start_timestamp_us is None:
            start_timestamp_us = max(header.date_s * 1_000_000, min_start_us)
        elif start_timestamp_us < min_start_us:
            raise ImportFormatError(
                f"--start-timestamp must be at least {min_start_us} us at {rate} Hz"
                " (tick 0 starts half a tick before the first CARLA frame)"
            )
        stream = first.again()
        # One session per import: CARLA time has no pauses, and an actor's absence shows as
        # dropped ticks rather than as a new session.
        replay_into_file(
            _samples(stream, channels, result, len(times), progress, info),
            output=output,
            source=SourceSpec(name=SOURCE_NAME, definition=definition, drives_frames=True),
            rate_hz=rate,
            start_timestamp_us=start_timestamp_us,
            metadata=metadata,
            derived=derived,
            policy_options={"session_idle_s": None},
        )
        result.problems = [str(p) for p in stream.problems]
    return result


def _lap_channels(track: Path) -> list[Any]:
    """The tracks plug-in's lap channels on the actor's ground position.

    Track files are y-up (ground = x, z); CARLA is z-up, so the track's x is CARLA X and its z is
    CARLA Y, both in metres (a track for a CARLA map is drawn in CARLA's world coordinates).
    """
    from wrtfd.tracks import load_track
    from wrtfd.tracks.lapchannels import lap_channels_for

    return [
        lap_channels_for(
            load_track(track), source=SOURCE_NAME, protocol="carla", x_field="x_m", z_field="y_m"
        )
    ]


def run_import(args: argparse.Namespace) -> int:
    """Entry point for ``wrtfd import --format carla`` (see ``wrtfd.cli.import_cmd``)."""
    result = import_recording(
        args.file,
        args.output,
        actor=args.actor,
        max_vehicles=args.max_vehicles,
        rate_hz=args.rate,
        track=args.track,
        start_timestamp_us=args.start_timestamp,
        force=args.force,
        progress=sys.stderr.isatty(),
    )
    err = sys.stderr
    err.write(
        f"{args.file}: {result.frames_in} CARLA frames -> {result.output} at {result.rate_hz} Hz"
        f" ({result.samples} samples)\n"
    )
    if result.dropped_frames:
        err.write(
            f"  {result.dropped_frames} frames dropped:"
            " elapsed time out of range or not after the previous frame's\n"
        )
    for problem in result.problems:
        err.write(f"  problem: {problem}\n")
    return 0
