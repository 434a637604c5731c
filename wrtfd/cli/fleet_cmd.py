"""The pit wall's commands: ``wrtfd watch``, ``wrtfd collect``, ``wrtfd fleet status``.

All three talk to the team's NATS server (``--url``, or the ``[fleet]`` of ``--config FILE``,
which also gives the credentials and TLS files). An unreachable or refusing server is one error
line and exit 2. They need the ``fleet`` extra (nats-py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wrtfd.cli.fleet_args import connection_args as _connection_args

__all__ = ["register"]

LAYOUT_RETRY_S = 5.0


def register(subparsers: Any) -> None:
    w = subparsers.add_parser(
        "watch",
        help="live table of every rig of the fleet (state, speed, lap, last/best lap, backlog)",
        description="Subscribe to every rig on the team's NATS server and show them live.",
    )
    _connection_args(w)
    w.add_argument("--interval", type=float, default=1.0, metavar="S", help="refresh every S seconds (1)")
    w.add_argument("--seconds", type=float, metavar="S", help="stop after S seconds (default: until Ctrl-C)")
    w.set_defaults(func=_watch)

    c = subparsers.add_parser(
        "collect",
        help="mirror the fleet's uploaded recordings into a directory (atomic, idempotent)",
        description=(
            "Download every recording in the bucket that is not in DIR yet, as DIR/<rig>/<file>;"
            " each file is checked against its SHA-256 before it appears under its name."
        ),
    )
    _connection_args(c)
    c.add_argument("--into", type=Path, required=True, metavar="DIR", help="the directory to mirror into")
    c.add_argument("--bucket", help="object store bucket (default: [fleet] bucket, else wrtfd)")
    c.add_argument("--rig", help="only this rig's files")
    c.add_argument("--follow", action="store_true", help="keep mirroring new files until Ctrl-C")
    c.set_defaults(func=_collect)

    f = subparsers.add_parser("fleet", help="the fleet as the server sees it (fleet status)")
    fsub = f.add_subparsers(dest="fleet_command", metavar="COMMAND", required=True)
    s = fsub.add_parser("status", help="every rig: state, upload backlog, link, last error")
    _connection_args(s)
    s.add_argument("--bucket", help="object store bucket (default: [fleet] bucket, else wrtfd)")
    s.add_argument("--json", action="store_true", help="print the rigs' status documents as JSON")
    s.set_defaults(func=_fleet_status)


def _options(args: argparse.Namespace) -> tuple[Any, str]:
    """(ConnectOptions, bucket) from the flags, falling back on ``--config``'s ``[fleet]``."""
    from wrtfd.errors import ConfigError
    from wrtfd.fleet.client import require_nats
    from wrtfd.fleet.config import DEFAULT_BUCKET, ConnectOptions, check_url, fleet_settings, tls_context

    require_nats()
    bucket = getattr(args, "bucket", None)
    if args.config is not None:
        from wrtfd.daemon.config import load_config

        loaded = load_config(args.config)
        cfg = loaded.config.fleet
        if cfg is None:
            raise ConfigError(f"{args.config}: no [fleet] section")
        settings = fleet_settings(cfg, resolve=loaded.resolve, output_dir=loaded.output_dir(), where="fleet")
        options = settings.connect
        if args.url:
            from dataclasses import replace

            options = replace(options, servers=tuple(check_url(args.url).split(",")))
        return options, bucket or settings.bucket
    if not args.url:
        raise ConfigError("give the server: --url nats://HOST:PORT (or --config FILE with a [fleet] section)")
    try:
        url = check_url(args.url)
    except ValueError as exc:
        raise ConfigError(f"--url: {exc}") from None
    if (args.user is None) != (args.password is None):
        raise ConfigError("--user and --password go together")
    tls = None
    if args.tls_ca or args.tls_cert or url.startswith("tls://"):
        tls = tls_context(args.tls_ca, args.tls_cert, args.tls_key)
    options = ConnectOptions(
        servers=tuple(url.split(",")),
        token=args.token,
        user=args.user,
        password=args.password,
        creds=args.creds,
        tls=tls,
    )
    return options, bucket or DEFAULT_BUCKET


def _run(coro: Any, shown: str) -> Any:
    """Run a client coroutine; a NATS failure on the way is one FleetError line."""
    from wrtfd.errors import WrtfdError
    from wrtfd.fleet.client import FleetError, describe_error

    try:
        return asyncio.run(coro)
    except (WrtfdError, KeyboardInterrupt, OSError):
        raise
    except Exception as exc:
        raise FleetError(f"{shown}: {describe_error(exc)}") from None


def _console() -> Any:
    from wrtfd.cli.status_cmd import _console as status_console  # the same terminal rules

    return status_console()


# --- watch -------------------------------------------------------------------------------------


async def _load_state(js: Any, view: Any) -> None:
    """The last status and layout of every rig and group, from the WRTFD_STATE stream (oldest
    first, so that the view keeps the rigs heard from most recently)."""
    from nats.js.errors import NotFoundError

    from wrtfd.fleet.client import STATE_STREAM, read_last_per_subject

    def feed(subject: str, data: bytes, stamp: float | None) -> None:
        now = time.monotonic()
        _feed(view, subject, data, now)
        if subject.endswith(".status") and stamp is not None:
            view.age_status(subject.split(".")[1], time.time() - stamp, now)

    try:
        await read_last_per_subject(js, STATE_STREAM, "wrtfd.>", feed)
    except NotFoundError:
        return


def _feed(view: Any, subject: str, data: bytes, now: float) -> None:
    """``view.feed`` that never raises: a message it could not take is counted and dropped (an
    exception escaping a subscription's callback goes to nats-py's error callback instead)."""
    try:
        view.feed(subject, data, now)
    except Exception:
        view.count("view_error")


async def _watch_loop(options: Any, args: argparse.Namespace) -> int:
    from rich.live import Live
    from rich.text import Text

    from wrtfd.daemon.fleet_view import render_watch
    from wrtfd.fleet.client import STATE_STREAM, connect
    from wrtfd.fleet.watch import FleetView

    console = _console()
    nc = await connect(options, name="wrtfd watch")
    view = FleetView()
    asked: dict[str, float] = {}
    try:
        js = nc.jetstream(timeout=5.0)
        await _load_state(js, view)
        fetches: set[asyncio.Task[None]] = set()

        async def fetch_layout(subject: str) -> None:
            from nats.js.errors import NotFoundError

            try:
                msg = await js.get_last_msg(STATE_STREAM, subject)
            except (NotFoundError, Exception):
                return
            _feed(view, subject, bytes(msg.data or b""), time.monotonic())

        async def on_msg(msg: Any) -> None:
            now = time.monotonic()
            try:
                wanted = view.needs_layout(msg.subject, msg.data)
            except Exception:
                wanted = False
            if wanted:
                layout_subject = msg.subject.rsplit(".", 1)[0] + ".layout"
                if now - asked.get(layout_subject, -1e9) > LAYOUT_RETRY_S:
                    asked[layout_subject] = now
                    task = asyncio.create_task(fetch_layout(layout_subject))
                    fetches.add(task)
                    task.add_done_callback(fetches.discard)
            _feed(view, msg.subject, msg.data, now)

        await nc.subscribe("wrtfd.>", cb=on_msg)
        deadline = None if args.seconds is None else time.monotonic() + args.seconds
        live = Live(console=console, auto_refresh=False) if console.is_terminal else None
        if live is not None:
            live.start()
        try:
            while True:
                stamp = time.strftime("%H:%M:%S")
                rendered = render_watch(
                    view.rows(time.monotonic()), stamp=stamp, dropped=sum(view.dropped.values())
                )
                if live is not None:
                    live.update(rendered, refresh=True)
                else:
                    console.print(Text(f"--- {stamp}", style="dim"))
                    console.print(rendered)
                    console.file.flush()
                if deadline is not None and time.monotonic() >= deadline:
                    return 0
                wait = (
                    args.interval
                    if deadline is None
                    else min(args.interval, max(0.0, deadline - time.monotonic()))
                )
                await asyncio.sleep(wait)
        finally:
            if live is not None:
                live.stop()
            for task in fetches:
                task.cancel()
    finally:
        await _close(nc)


async def _close(nc: Any) -> None:
    import contextlib

    with contextlib.suppress(Exception):
        await asyncio.wait_for(nc.close(), 2.0)


def _watch(args: argparse.Namespace) -> int:
    from wrtfd.errors import ConfigError

    seconds_ok = args.seconds is None or (math.isfinite(args.seconds) and args.seconds >= 0)
    if not (math.isfinite(args.interval) and args.interval > 0) or not seconds_ok:
        raise ConfigError("--interval takes a positive number of seconds, --seconds a non-negative one")
    options, _bucket = _options(args)
    try:
        return int(_run(_watch_loop(options, args), options.shown))
    except KeyboardInterrupt:
        return 0


# --- collect -----------------------------------------------------------------------------------


def _collect(args: argparse.Namespace) -> int:
    from wrtfd.daemon.status_view import format_bytes
    from wrtfd.fleet.collect import CollectReport, collect

    options, bucket = _options(args)
    err = sys.stderr
    tty = err.isatty()

    def on_file(name: str, report: CollectReport) -> None:
        err.write(f"{'' if not tty else chr(13)}collected {name}\n")
        err.flush()

    def failed(line: str) -> None:
        err.write(f"wrtfd: error: {line}\n")
        err.flush()

    def progress(name: str, done: int, size: int) -> None:
        if tty and size:
            err.write(f"\r{name}: {format_bytes(done)} of {format_bytes(size)} ({done * 100 // size}%)\x1b[K")
            err.flush()

    try:
        report = _run(
            collect(
                options,
                bucket,
                args.into,
                rig=args.rig,
                follow=args.follow,
                progress=progress,
                on_file=on_file,
                on_failure=failed,
            ),
            options.shown,
        )
    except KeyboardInterrupt:
        err.write("interrupted: files collected so far are complete; run again to go on\n")
        return 130
    for name in report.skipped_names:
        err.write(f"wrtfd: warning: skipped object with an unsafe name: {name!r}\n")
    if report.malformed_infos:
        err.write(
            f"wrtfd: warning: skipped {report.malformed_infos} object(s) whose info is not well-formed\n"
        )
    err.write(
        f"{len(report.downloaded)} new file(s) ({format_bytes(report.downloaded_bytes)}),"
        f" {report.present} already in {args.into}"
        + (f", {len(report.failed)} failed" if report.failed else "")
        + "\n"
    )
    return 1 if report.failed else 0


# --- fleet status ------------------------------------------------------------------------------


_Kept = dict[str, tuple[bytes, float | None]]


async def _fleet_status_docs(options: Any, bucket: str) -> tuple[_Kept, int, Any]:
    """(rig -> (its last status as sent, its age), rigs left out, the bucket's size): at most
    :data:`~wrtfd.fleet.watch.MAX_RIGS` rigs, those heard from most recently (as ``watch``)."""
    from nats.js.errors import BucketNotFoundError, NotFoundError

    from wrtfd.fleet.client import STATE_STREAM, connect, read_last_per_subject
    from wrtfd.fleet.watch import MAX_RIGS, MAX_STATUS_BYTES

    nc = await connect(options, name="wrtfd fleet status")
    rigs: _Kept = {}
    left_out = 0

    def keep(subject: str, data: bytes, stamp: float | None) -> None:
        nonlocal left_out
        if len(data) > MAX_STATUS_BYTES:
            return
        rigs.pop(subject.split(".")[1], None)
        if len(rigs) >= MAX_RIGS:  # oldest first: the first kept is the least recent
            del rigs[next(iter(rigs))]
            left_out += 1
        rigs[subject.split(".")[1]] = (data, None if stamp is None else max(0.0, time.time() - stamp))

    try:
        js = nc.jetstream(timeout=5.0)
        try:
            await read_last_per_subject(js, STATE_STREAM, "wrtfd.*.status", keep)
        except NotFoundError:
            pass
        bucket_info = None
        try:
            store = await js.object_store(bucket)
            st = await store.status()
            bucket_info = {"bucket": bucket, "bytes": st.size}
        except BucketNotFoundError:
            pass
        return rigs, left_out, bucket_info
    finally:
        await _close(nc)


def _finite_float(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def _status_doc(data: bytes) -> dict[str, Any] | None:
    """A rig's status as a JSON object with its non-finite numbers (``1e400``, ``NaN``) as null;
    None if it is not a JSON object (too deep, a number of 5,000 digits, not JSON at all)."""
    try:
        doc = json.loads(data, parse_float=_finite_float, parse_constant=lambda _name: None)
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _write_json(rigs: Mapping[str, tuple[bytes, float | None]], left_out: int, bucket_info: Any) -> None:
    """``{"rigs": {rig: {...status, "age_s"}}, "bucket": ...}`` (indented), one rig at a time:
    valid JSON whatever the rigs sent (``allow_nan=False``); a status that cannot be written
    (nested too deep to encode) is left out, as one that is not JSON."""
    out = sys.stdout
    out.write('{\n  "rigs": {')
    first = True
    for name in sorted(rigs):
        data, age = rigs[name]
        doc = _status_doc(data)
        if doc is None:
            continue
        try:
            text = json.dumps({**doc, "age_s": age}, indent=2, allow_nan=False)
        except (ValueError, RecursionError):
            continue
        out.write(
            ("\n" if first else ",\n") + "    " + json.dumps(name) + ": " + text.replace("\n", "\n    ")
        )
        first = False
    out.write("\n  }," if not first else "},")
    if left_out:
        out.write(f'\n  "rigs_left_out": {left_out},')
    out.write('\n  "bucket": ' + json.dumps(bucket_info, indent=2).replace("\n", "\n  ") + "\n}\n")


def _fleet_status(args: argparse.Namespace) -> int:
    from rich.text import Text

    from wrtfd.daemon.fleet_view import render_fleet_status
    from wrtfd.daemon.status_view import format_bytes
    from wrtfd.fleet import untrusted
    from wrtfd.fleet.watch import StatusSummary, summarize_status

    options, bucket = _options(args)
    rigs, left_out, bucket_info = _run(_fleet_status_docs(options, bucket), options.shown)
    if args.json:
        _write_json(rigs, left_out, bucket_info)
        return 0
    summaries: dict[str, tuple[StatusSummary, float | None]] = {}
    for name, (data, age) in rigs.items():
        try:
            doc = untrusted.loads(data)
        except ValueError:
            continue
        if isinstance(doc, dict):
            summaries[name] = (summarize_status(doc), age)
    console = _console()
    console.print(render_fleet_status(summaries, url=options.shown, left_out=left_out))
    if bucket_info is not None:
        console.print(Text(f"bucket {bucket}: {format_bytes(bucket_info['bytes'])} stored"))
    return 0
