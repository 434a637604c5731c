"""``wrtfd simulate``: drive a simulated car round a track and send a game's UDP telemetry.

The car follows one lane of the track (speed limited by grip in the arcs, braking before them,
six gears); the packets are the game's real format at its rate. ``--speed-scale 10`` sends ten
simulated seconds per real second; the packets' own clocks carry simulated time. At the end the
simulator's lap times are printed (stderr, or JSON on stdout with ``--json``): they are the
reference the recorder's lap detection is checked against.

ACC (``--protocol acc``) is served, not sent: ``--listen HOST:PORT`` plays the game's
broadcasting server, waits for a client to register with ``--password`` and then streams the
session (with a few AI cars) to it. EA SPORTS WRC (``--protocol wrc``) drives the track once, as
a rally stage.

Gran Turismo 7 streams only on request, so ``--protocol gt7`` plays the console instead of
sending: ``--listen HOST:PORT`` binds the heartbeat port (the console's is 33739), the drive
starts with the first heartbeat, and the encrypted packets go back to the heartbeat's sender in
the variant its letter asked for (``--gt7-variants`` limits the letters this console knows).

A GNSS receiver (``--protocol ubx`` or ``nmea``) is played on a pseudo-terminal (``--pty``; its
path is the first line on stdout, ``--link`` makes a symlink to it) with the car on the track
file's geodetic anchor: a u-blox receiver (``--generation m8|m10``) answers MON-VER and the
configuration messages and streams NAV-PVT at the rate it is set to; a plain NMEA receiver sends
RMC+GGA at ``--rate`` (10 Hz). ``--noise-m``, ``--dropouts``, ``--degrade`` shape the fix;
``--truth FILE`` gets the car's true lap and sector times (docs/gnss.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from wrtfd.cli.arg_types import SECONDS, number

__all__ = ["register"]

#: GNSS receivers, played on a pseudo-terminal (``--pty``) rather than sent over UDP (their
#: descriptors have no datagram simulator: wrtfd.simulate.gnss_pty plays them).
SERIAL = ("ubx", "nmea")
#: Protocols whose game waits for the recorder (``--listen``, not ``--to``), and what to say when
#: given ``--to``: ACC is a server clients register with, the GT7 console streams on a heartbeat.
SERVED = {
    "acc": "the game is a server: use --listen HOST:PORT (or --record)",
    "gt7": "gt7 streams only on request; play the console with --listen HOST:33739 (or --record)",
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="send simulated game telemetry (no game needed)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from wrtfd.protocols import Simulator, all_protocols

    simulated = [n for n, info in all_protocols().items() if isinstance(info.simulator, Simulator)]
    p.add_argument(
        "--protocol", required=True, choices=[*simulated, *SERIAL], help="game packet format to send"
    )
    p.add_argument("--track", type=Path, required=True, help="track file (format 2.0)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--to", metavar="HOST:PORT", help="where to send the datagrams")
    where.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="acc: serve the broadcasting protocol here; gt7: play the console, waiting for heartbeats"
        " here (the console's port is 33739)",
    )
    where.add_argument(
        "--record",
        type=Path,
        metavar="DIR",
        help="no network: decode and record the session into WRTF files in DIR (with lap channels)",
    )
    where.add_argument(
        "--pty",
        action="store_true",
        help="ubx, nmea: play the receiver on a pseudo-terminal (path on stdout)",
    )
    gnss = p.add_argument_group("GNSS receivers (--protocol ubx | nmea, --pty)")
    gnss.add_argument(
        "--generation", choices=("m8", "m10"), default="m10", help="ubx: receiver (default m10)"
    )
    gnss.add_argument("--baud", type=_baud, help="the receiver's UART rate at start (ubx 9600, nmea 38400)")
    gnss.add_argument(
        "--link", type=Path, help="also make this symlink to the pty (a /dev/serial/by-id stand-in)"
    )
    gnss.add_argument(
        "--noise-m", type=number(0.0, 1000.0), default=1.0, help="position error, m per axis (default 1)"
    )
    gnss.add_argument(
        "--noise-tau-s",
        type=number(0.0, 1e6, above=True),
        default=600.0,
        help="how slowly the position error wanders (default 600 s)",
    )
    gnss.add_argument(
        "--dropouts", type=number(0.0, 60.0), default=0.0, help="fix losses (1-3 s) per minute (default 0)"
    )
    gnss.add_argument(
        "--degrade",
        type=number(0.0, 60.0),
        default=0.0,
        help="degraded-fix spells (3-10 s) per minute (default 0)",
    )
    gnss.add_argument("--truth", type=Path, help="write the car's true lap and sector times (JSON) here")
    gnss.add_argument("--utc-start", help="UTC of the first epoch, ISO 8601 (default: now, whole second)")
    gnss.add_argument(
        "--start-delay",
        type=number(0.0, 3600.0),
        default=1.0,
        help="s from NAV-PVT on (ubx) / the line opened (nmea) to the car starting",
    )
    gnss.add_argument(
        "--hold", type=number(0.0, 3600.0), default=1.0, help="s to keep sending after the drive (default 1)"
    )
    gnss.add_argument(
        "--pit-lap",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="take the pit lane (12 m right of the track, 160 m either side of the line) at the end"
        " of lap N (repeatable; docs/circuits.md, Pit lane)",
    )
    gnss.add_argument(
        "--refuse",
        action="append",
        default=[],
        metavar="NAME",
        help="ubx: NAK this message (CFG-NAV5) or key (CFG_RATE_MEAS)",
    )
    p.add_argument("--laps", type=int, default=3, help="timed laps to drive (default 3)")
    p.add_argument(
        "--rate", type=number(1.0, 1000.0), help="packets per simulated second (default: the game's, 60)"
    )
    p.add_argument(
        "--speed-scale",
        type=number(0.0, 1000.0, above=True),
        default=1.0,
        help="simulated seconds per real second (default 1)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0): same seed, same run")
    p.add_argument("--lane", type=int, default=0, help="lane to drive (default 0)")
    p.add_argument(
        "--forza-format",
        choices=("sled", "fm7", "horizon", "fm2023"),
        default="fm2023",
        help="forza packet variant (default fm2023, 331 bytes)",
    )
    p.add_argument("--f1-format", type=int, choices=(2024, 2025), default=2024, help="f1 packetFormat")
    p.add_argument(
        "--invalid-lap",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="f1, acc: the game marks lap N invalid from half-way round (its current-lap flag); repeatable",
    )
    p.add_argument("--password", default="", help="acc: the connection password clients must give")
    p.add_argument(
        "--command-password", default="", help="acc: the command password (none: every client may)"
    )
    p.add_argument(
        "--track-data-delay",
        type=number(0.0, 3600.0),
        default=0.0,
        metavar="S",
        help="acc: answer track data requests only S simulated seconds after a client registered"
        " (a slow game; default 0)",
    )
    p.add_argument(
        "--ai-cars", type=int, default=3, help="acc: AI cars besides the simulated one (0..4, default 3)"
    )
    p.add_argument(
        "--wait",
        "--wait-s",
        dest="wait",
        type=SECONDS,
        default=60.0,
        help="acc: seconds to wait for a client to register; gt7: for the first heartbeat; ubx: for"
        " NAV-PVT to be switched on; nmea: for a recorder to open the line (default 60)",
    )
    p.add_argument(
        "--gt7-variants",
        default="AB~C",
        help="gt7: heartbeat letters the simulated console knows (default AB~C; others are ignored)",
    )
    p.add_argument(
        "--gt7-timeout-s",
        type=SECONDS,
        default=10.0,
        help="gt7: the console stops streaming after this long without a heartbeat (default 10)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.set_defaults(func=_run)


def _baud(text: str) -> int:
    """A UART rate: a whole number from 300 to 4,000,000 (0 was taken, and the drive never began)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 300 <= value <= 4_000_000:
        raise argparse.ArgumentTypeError(f"{value} is not a baud rate from 300 to 4000000")
    return value


def _run(args: argparse.Namespace) -> int:
    from wrtfd.errors import WrtfdError
    from wrtfd.simulate import Simulation, TrackInfo, make_encoder, parse_address
    from wrtfd.tracks import LanePath, load_track, timing_sectors

    if args.laps < 1 or args.laps > 1000:
        raise WrtfdError(f"--laps must be 1..1000, got {args.laps}")
    address: tuple[str, int] | None = None
    if args.protocol in SERIAL or args.pty:
        return _gnss(args)
    if args.protocol in SERVED and args.to is not None:
        raise WrtfdError(f"--to: --protocol {args.protocol}: {SERVED[args.protocol]}")
    if args.protocol not in SERVED and args.listen is not None:
        raise WrtfdError(
            f"--listen is for {', '.join(SERVED)} (acc serves broadcasting clients, only gt7 waits for"
            f" heartbeats); send {args.protocol} with --to HOST:PORT"
        )
    if not 0 <= args.ai_cars <= 4:
        raise WrtfdError(f"--ai-cars must be 0..4, got {args.ai_cars}")
    if not 0 <= args.track_data_delay <= 3600:
        raise WrtfdError(f"--track-data-delay must be 0..3600 s, got {args.track_data_delay}")
    if not 0 < args.wait <= 3600:
        raise WrtfdError(f"--wait must be 0..3600 s, got {args.wait}")
    if args.protocol == "wrc":
        args.laps = 1  # a rally stage: the track once, start line to start line
    gt7_letters = _gt7_letters(args)
    if args.to is not None or args.listen is not None:
        option = "--to" if args.to is not None else "--listen"
        try:
            address = parse_address(args.to if args.to is not None else args.listen)
        except ValueError as exc:
            raise WrtfdError(f"{option}: {exc}") from None
    track = load_track(args.track)
    path = LanePath(track, args.lane)
    sectors = timing_sectors(track, path)
    info = TrackInfo(track.name, path.length_m, sectors, args.laps)
    encoder = make_encoder(
        args.protocol,
        info,
        seed=args.seed,
        forza_format=args.forza_format,
        f1_format=args.f1_format,
        gt7_variant=gt7_letters[-1],
        invalid_laps=frozenset(args.invalid_lap),
    )
    rate = args.rate or encoder.rate_hz
    sim = Simulation(path, laps=args.laps, rate_hz=rate, seed=args.seed, sectors_m=sectors)
    summary: dict[str, Any] = {
        "protocol": args.protocol,
        "track": track.name,
        "track_file": str(args.track),
        "lane": args.lane,
        "lap_length_m": path.length_m,
        "rate_hz": rate,
        "speed_scale": args.speed_scale,
        "seed": args.seed,
    }
    if address is not None and args.protocol == "gt7":
        summary.update(_console(args, sim, encoder, gt7_letters, address, rate))
        where = f"the heartbeat's sender ({args.listen})"
    elif address is not None and args.listen is not None:
        summary.update(_serve(args, sim, info, address, rate))
        where = f"client(s) of {address[0]}:{address[1]}"
    elif address is not None:
        summary.update(_send(args, sim, encoder, address, rate))
        where = f"{address[0]}:{address[1]}"
    else:
        from wrtfd.simulate.record import record_simulation
        from wrtfd.tracks.lapchannels import POSITION_FIELDS, lap_channels_for

        derived = []
        if args.protocol in POSITION_FIELDS:
            derived.append(
                lap_channels_for(track, source=args.protocol, protocol=args.protocol, lane=args.lane)
            )
        files = record_simulation(
            sim,
            encoder,
            args.record,
            protocol=args.protocol,
            derived=derived,
            metadata={"Track": track.name, "wrtfd.simulated": "1"},
        )
        summary["files"] = [str(f) for f in files]
        where = ", ".join(summary["files"])
        for lap in sim.laps:
            sys.stderr.write(f"lap {lap.number}: {lap.time_s:.3f} s\n")
    best = min((lap.time_s for lap in sim.laps), default=None)
    summary["laps"] = [
        {
            "lap": lap.number,
            "start_s": lap.start_s,
            "end_s": lap.end_s,
            "time_s": lap.time_s,
            "sectors_s": list(lap.sector_times_s),
        }
        for lap in sim.laps
    ]
    summary["best_lap_s"] = best
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        best_text = f", best {best:.3f} s" if best is not None else ""
        sys.stderr.write(f"{len(sim.laps)} laps{best_text}: {where}\n")
    return 0


def _gt7_letters(args: argparse.Namespace) -> str:
    """The heartbeat letters of ``--gt7-variants`` in the order A, B, ~, C (the richest last).

    :raises WrtfdError: a bad letter or timeout.
    """
    from wrtfd.errors import WrtfdError

    order = "AB~C"
    wanted = set(args.gt7_variants)
    if not wanted or not wanted <= set(order):
        raise WrtfdError(f"--gt7-variants: letters from {order}, got {args.gt7_variants!r}")
    if args.gt7_timeout_s <= 0:
        raise WrtfdError("--gt7-timeout-s must be positive")
    return "".join(c for c in order if c in wanted)


def _console(
    args: argparse.Namespace, sim: Any, encoder: Any, letters: str, address: tuple[str, int], rate: float
) -> dict[str, Any]:
    """gt7: play the console on ``--listen`` until the drive is over."""
    import socket

    from wrtfd.errors import WrtfdError
    from wrtfd.simulate.gt7 import Gt7Console

    host, port = address
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise WrtfdError(f"--listen: cannot bind {host}:{port}: {exc.strerror or exc}") from None
        sock.setblocking(False)
        console = Gt7Console(encoder, sock, understands=letters, timeout_s=args.gt7_timeout_s)
        sys.stderr.write(f"gt7 console on {host}:{port}: waiting for a heartbeat ({letters})\n")
        if not console.wait_first(args.wait):
            raise WrtfdError(f"--listen: no heartbeat on {host}:{port} within {args.wait:g} s")
        stats = console.serve(
            sim.states(), rate_hz=rate, speed_scale=args.speed_scale, on_tick=_progress(sim, rate)
        )
    return dataclasses.asdict(stats)


def _send(
    args: argparse.Namespace, sim: Any, encoder: Any, address: tuple[str, int], rate: float
) -> dict[str, Any]:
    import socket

    from wrtfd.errors import WrtfdError
    from wrtfd.simulate import send_session

    host, port = address
    on_tick = _progress(sim, rate)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        addr = socket.getaddrinfo(host, port, family, socket.SOCK_DGRAM)[0][4]
    except socket.gaierror as exc:
        raise WrtfdError(f"--to: cannot resolve {host!r}: {exc}") from None
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        stats = send_session(
            sim.states(),
            encoder,
            sock,
            (str(addr[0]), int(addr[1])),
            rate_hz=rate,
            speed_scale=args.speed_scale,
            on_tick=on_tick,
        )
    return dataclasses.asdict(stats)


def _progress(sim: Any, rate: float) -> Any:
    """The per-tick callback printing lap times (and, on a TTY, where the car is)."""
    tty = sys.stderr.isatty()
    last_lap = [0]

    def on_tick(state: Any) -> None:
        if sim.laps and len(sim.laps) != last_lap[0]:
            last_lap[0] = len(sim.laps)
            lap = sim.laps[-1]
            sys.stderr.write(f"lap {lap.number}: {lap.time_s:.3f} s\n")
        elif tty and state.racing and int(state.t_s * rate) % int(rate) == 0:
            sys.stderr.write(
                f"\rt={state.t_s:7.1f} s lap {state.lap} {state.lap_distance_m:7.1f} m"
                f" {state.speed_mps * 3.6:5.0f} km/h gear {state.gear}\r"
            )

    return on_tick


def _serve(
    args: argparse.Namespace, sim: Any, info: Any, address: tuple[str, int], rate: float
) -> dict[str, Any]:
    """ACC: play the broadcasting server on ``address`` until the session ends."""
    import socket

    from wrtfd.errors import WrtfdError
    from wrtfd.simulate.acc import AccBroadcastServer, serve

    host, port = address
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = AccBroadcastServer(
        info,
        password=args.password,
        command_password=args.command_password,
        ai_cars=args.ai_cars,
        rate_hz=rate,
        track_data_delay_s=args.track_data_delay,
        invalid_laps=frozenset(args.invalid_lap),
    )
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise WrtfdError(f"--listen: cannot bind {host}:{port}: {exc.strerror or exc}") from None

        def waiting() -> None:
            sys.stderr.write(f"waiting for a broadcasting client on {host}:{port}\n")

        stats = serve(
            sim.states(),
            server,
            sock,
            rate_hz=rate,
            speed_scale=args.speed_scale,
            wait_s=args.wait,
            on_wait=waiting,
            on_tick=_progress(sim, rate),
        )
    return {
        **dataclasses.asdict(stats),
        "clients": len(server.clients),
        "registrations_refused": server.refused,
        "events": [list(e) for e in server.events],
    }


def _gnss(args: argparse.Namespace) -> int:
    """ubx / nmea: play the receiver on a pty until the drive is over."""
    import datetime as dt
    import time

    from wrtfd.errors import WrtfdError
    from wrtfd.simulate.gnss import Drive, GnssErrors, UbxReceiver
    from wrtfd.simulate.gnss_pty import GnssPty, baud_constant
    from wrtfd.tracks import LanePath, load_track, timing_sectors
    from wrtfd.tracks.geodesy import track_plane

    if args.protocol not in SERIAL:
        raise WrtfdError(f"--pty is for {', '.join(SERIAL)}, not {args.protocol}")
    if args.truth is not None and not args.truth.absolute().parent.is_dir():  # not once the car drives
        raise WrtfdError(f"--truth {args.truth}: no directory {args.truth.absolute().parent}")
    if not args.pty:
        raise WrtfdError(f"--protocol {args.protocol}: a receiver is played on a pseudo-terminal: give --pty")
    if not 1 <= args.laps <= 1000:
        raise WrtfdError(f"--laps must be 1..1000, got {args.laps}")
    if args.speed_scale <= 0:
        raise WrtfdError(f"--speed-scale must be positive, got {args.speed_scale}")
    if args.protocol == "ubx" and args.rate is not None:
        raise WrtfdError("--rate: a u-blox receiver runs at the rate the recorder sets (1 Hz until then)")
    rate = args.rate if args.rate is not None else 10.0
    if not 0.1 <= rate <= 50:
        raise WrtfdError(f"--rate must be 0.1..50 Hz, got {rate}")
    if args.noise_m < 0 or args.noise_tau_s <= 0 or args.dropouts < 0 or args.degrade < 0:
        raise WrtfdError("--noise-m, --dropouts and --degrade must be >= 0, --noise-tau-s > 0")
    if args.start_delay < 0 or args.hold < 0 or not 0 < args.wait <= 3600:
        raise WrtfdError("--start-delay and --hold must be >= 0, --wait 0..3600 s")
    baud = args.baud if args.baud is not None else (9600 if args.protocol == "ubx" else 38400)
    try:
        baud_constant(baud)
    except ValueError as exc:
        raise WrtfdError(f"--baud: {exc}") from None
    if args.utc_start is not None:
        try:
            start = dt.datetime.fromisoformat(args.utc_start)
        except ValueError as exc:
            raise WrtfdError(f"--utc-start: {exc}") from None
        if start.tzinfo is None:
            start = start.replace(tzinfo=dt.UTC)
        utc_start_ns = round(start.timestamp() * 1e9)
    else:
        utc_start_ns = (time.time_ns() // 1_000_000_000 + 1) * 1_000_000_000
    track = load_track(args.track)
    plane = track_plane(track.extensions)
    if plane is None:
        raise WrtfdError(
            f'{args.track}: no geodetic anchor ("wrtfd": {{"geo": {{"lat", "lon"}}}}): not on the map'
        )
    path = LanePath(track, args.lane)
    sectors = timing_sectors(track, path)
    drive = Drive(
        path, plane, laps=args.laps, seed=args.seed, sectors_m=sectors, pit_laps=tuple(args.pit_lap)
    )
    errors = GnssErrors(
        seed=args.seed,
        noise_m=args.noise_m,
        tau_s=args.noise_tau_s,
        dropouts_per_min=args.dropouts,
        degraded_per_min=args.degrade,
    )
    receiver = (
        UbxReceiver(generation=args.generation, baud=baud, refuse=frozenset(args.refuse))
        if args.protocol == "ubx"
        else None
    )
    pty = GnssPty(
        drive,
        errors,
        receiver=receiver,
        baud=baud,
        rate_hz=rate,
        utc_start_ns=utc_start_ns,
        speed_scale=args.speed_scale,
        start_delay_s=args.start_delay,
        hold_s=args.hold,
        link=args.link,
        seed=args.seed,
    )
    summary: dict[str, Any] = {
        "protocol": args.protocol,
        "generation": args.generation if args.protocol == "ubx" else None,
        "track": track.name,
        "track_file": str(args.track),
        "lane": args.lane,
        "lap_length_m": path.length_m,
        "seed": args.seed,
        "noise_m": args.noise_m,
        "speed_scale": args.speed_scale,
        "pty": pty.path,
    }
    sys.stdout.write(pty.path + "\n")
    sys.stdout.flush()
    what = f"u-blox {args.generation}" if receiver is not None else "NMEA receiver"
    sys.stderr.write(f"{what} on {pty.path} at {baud} baud: waiting for a recorder\n")

    def started(p: GnssPty) -> None:
        sys.stderr.write(f"the car starts ({args.laps} laps of {track.name})\n")
        if args.truth is not None:
            p.write_truth(args.truth, summary)

    import signal

    # SIGTERM ends the drive early but cleanly: the truth file gets what happened
    previous = signal.signal(signal.SIGTERM, lambda *_: pty.stop())
    try:
        stats = pty.run(wait_s=args.wait, on_start=started)
    finally:
        signal.signal(signal.SIGTERM, previous)
        pty.close()
    if pty.drive_start_s is None:
        raise WrtfdError(f"nobody started the drive within {args.wait:g} s (no recorder opened {pty.path})")
    summary.update(pty.truth())
    summary["stats"] = dataclasses.asdict(stats)
    if args.truth is not None:
        pty.write_truth(args.truth, summary)
    for lap in summary["laps"]:
        sys.stderr.write(f"lap {lap['lap']}: {lap['time_s']:.3f} s\n")
    sys.stderr.write(
        f"{stats.epochs} epochs, {stats.rate_hz:g} Hz at the end ({stats.nav_pvt} NAV-PVT),"
        f" baud changes {stats.baud_changes}\n"
    )
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    return 0
