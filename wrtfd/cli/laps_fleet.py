"""``wrtfd laps --fleet --track T [--car C] [--driver D]``: the team's leaderboard from the lap
records on the fleet's server (``--url``/``--config``, like ``wrtfd fleet status``): each
driver's best lap, gap to the fastest, laps and theoretical best (best sectors), and the team's
theoretical best. ``T`` is a track name as the records give it (or a track file: its name).

Apart from :mod:`wrtfd.cli.laps` (an offline command of the core install): only this module's
functions import the fleet (the ``fleet`` extra) and the config loader, when ``--fleet`` runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from wrtfd.cli.fleet_args import connection_args
from wrtfd.tracks.laps import format_lap_time

__all__ = ["add_fleet", "leaderboard_command"]


def add_fleet(p: argparse.ArgumentParser, file_command: Callable[[argparse.Namespace], int]) -> None:
    """``wrtfd laps``'s fleet options; its command becomes: the leaderboard with ``--fleet``,
    else ``file_command`` (the laps of a FILE)."""
    f = p.add_argument_group("the team's laps (--fleet)")
    f.add_argument(
        "--fleet",
        action="store_true",
        help="the team's leaderboard from the fleet's lap records (with --track)",
    )
    f.add_argument("--car", help="--fleet: only this car")
    f.add_argument("--driver", help="--fleet: only this driver")
    f.add_argument(
        "--include-invalid",
        action="store_true",
        help="--fleet: count laps the game marked invalid too (left out by default)",
    )
    f.add_argument("--laps-bucket", help="--fleet: the key-value bucket (default: [fleet] laps_bucket)")
    connection_args(p)

    def run(args: argparse.Namespace) -> int:
        from wrtfd.errors import ConfigError

        if args.fleet:
            if args.file is not None:
                raise ConfigError("--fleet reads the fleet's lap records: give no FILE")
            if args.track is None:
                raise ConfigError("--fleet needs --track T (the track's name, or its track file)")
            return leaderboard_command(args)
        if args.file is None:
            raise ConfigError("give a WRTF FILE (or --fleet --track T)")
        return file_command(args)

    p.set_defaults(func=run)


def leaderboard_command(args: argparse.Namespace) -> int:
    from wrtfd.cli.fleet_cmd import _options
    from wrtfd.cli.fleet_cmd import _run as run_client
    from wrtfd.fleet.laps import DEFAULT_LAPS_BUCKET
    from wrtfd.fleet.leaderboard import leaderboard

    track = str(args.track)
    if args.track.suffix and args.track.is_file():
        from wrtfd.tracks import load_track

        track = load_track(args.track).name
    options, _ = _options(args)
    bucket = args.laps_bucket or _config_laps_bucket(args) or DEFAULT_LAPS_BUCKET
    records = run_client(_read(options, bucket), options.shown)
    board = leaderboard(
        records, track=track, car=args.car, driver=args.driver, include_invalid=args.include_invalid
    )
    if args.json:
        doc = {
            "track": track,
            "car": args.car,
            "driver": args.driver,
            "theoretical_best_s": board.theoretical_s,
            "skipped_records": board.skipped,
            "invalid_laps_left_out": board.invalid,
            "pit_laps_left_out": board.pit,
            "drivers": [
                {
                    "driver": r.driver,
                    "best_s": r.best_s,
                    "gap_s": round(r.gap_s, 6),
                    "laps": r.laps,
                    "theoretical_best_s": r.theoretical_s,
                    "cars": list(r.cars),
                    "rigs": list(r.rigs),
                    "best": dict(r.best),
                }
                for r in board.rows
            ],
        }
        # records are read with NaN and overflowing numbers as null (wrtfd.fleet.untrusted)
        sys.stdout.write(json.dumps(doc, indent=2, allow_nan=False) + "\n")
        return 0
    out = sys.stdout
    if not board.rows:
        out.write(
            f"no laps at {_printable(track)}" + (f" in {_printable(args.car)}" if args.car else "") + "\n"
        )
        return 0
    out.write(_printable(track) + (f", {_printable(args.car)}" if args.car else "") + "\n")
    out.write("  pos  driver                  best       gap  laps  theoretical  car\n")
    for i, r in enumerate(board.rows, 1):
        gap = "" if i == 1 else f"+{r.gap_s:.3f}"
        theo = format_lap_time(r.theoretical_s) if r.theoretical_s is not None else "-"
        out.write(
            f"  {i:>3}  {_printable(r.driver[:22]):<22}  {format_lap_time(r.best_s):>8}  {gap:>8}"
            f"  {r.laps:>4}  {theo:>11}  {_printable(', '.join(r.cars))}\n"
        )
    if board.theoretical_s is not None:
        out.write(f"  team's theoretical best (best sectors): {format_lap_time(board.theoretical_s)}\n")
    if board.invalid:
        out.write(f"  {board.invalid} invalid lap(s) left out (--include-invalid counts them)\n")
    if board.pit:
        out.write(f"  {board.pit} in- or out-lap(s) left out\n")
    return 0


def _printable(text: str) -> str:
    """Other rigs' names as text a terminal shows (a control character, an escape sequence's
    start, shows as ``?``)."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _config_laps_bucket(args: argparse.Namespace) -> str | None:
    if args.config is None:
        return None
    from wrtfd.daemon.config import load_config

    cfg = load_config(args.config).config.fleet
    return None if cfg is None else cfg.laps_bucket


async def _read(options: Any, bucket: str) -> list[dict[str, Any]]:
    import asyncio
    import contextlib

    from wrtfd.fleet.client import connect
    from wrtfd.fleet.laps import read_records

    nc = await connect(options, name="wrtfd laps --fleet")
    try:
        return await read_records(nc.jetstream(timeout=10.0), bucket)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(nc.close(), 2.0)
