"""The pit wall's commands: ``wrtfd watch``, ``wrtfd collect``, ``wrtfd fleet status``.

All three talk to the team's NATS server (``--url``, or the ``[fleet]`` of ``--config FILE``,
which also gives the credentials and TLS files). An unreachable or refusing server is one error
line and exit 2. They need the ``fleet`` extra (nats-py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
    """The last status and layout of every rig and group, from the WRTFD_STATE stream."""
    from nats.js.errors import NotFoundError

    from wrtfd.fleet.client import STATE_STREAM

    try:
        info = await js.stream_info(STATE_STREAM, subjects_filter="wrtfd.>")
    except NotFoundError:
        return
    subjects = sorted(info.state.subjects or {}, key=lambda s: not s.endswith(".layout"))
    for subject in subjects:
        try:
            msg = await js.get_last_msg(STATE_STREAM, subject)
        except NotFoundError:
            continue
        now = time.monotonic()
        view.feed(subject, bytes(msg.data or b""), now)
        if subject.endswith(".status") and msg.time is not None:
            age = time.time() - msg.time.timestamp()
            view.age_status(subject.split(".")[1], age, now)


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
            view.feed(subject, bytes(msg.data or b""), time.monotonic())

        async def on_msg(msg: Any) -> None:
            now = time.monotonic()
            if view.needs_layout(msg.subject, msg.data):
                layout_subject = msg.subject.rsplit(".", 1)[0] + ".layout"
                if now - asked.get(layout_subject, -1e9) > LAYOUT_RETRY_S:
                    asked[layout_subject] = now
                    task = asyncio.create_task(fetch_layout(layout_subject))
                    fetches.add(task)
                    task.add_done_callback(fetches.discard)
            view.feed(msg.subject, msg.data, now)

        await nc.subscribe("wrtfd.>", cb=on_msg)
        deadline = None if args.seconds is None else time.monotonic() + args.seconds
        live = Live(console=console, auto_refresh=False) if console.is_terminal else None
        if live is not None:
            live.start()
        try:
            while True:
                stamp = time.strftime("%H:%M:%S")
                rendered = render_watch(view.rows(time.monotonic()), stamp=stamp)
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

    if args.interval <= 0 or (args.seconds is not None and args.seconds < 0):
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


async def _fleet_status_docs(
    options: Any, bucket: str
) -> tuple[dict[str, tuple[dict[str, Any], float | None]], Any]:
    from nats.js.errors import BucketNotFoundError, NotFoundError

    from wrtfd.fleet.client import STATE_STREAM, connect

    nc = await connect(options, name="wrtfd fleet status")
    rigs: dict[str, tuple[dict[str, Any], float | None]] = {}
    try:
        js = nc.jetstream(timeout=5.0)
        try:
            info = await js.stream_info(STATE_STREAM, subjects_filter="wrtfd.*.status")
            subjects = sorted(info.state.subjects or {})
        except NotFoundError:
            subjects = []
        for subject in subjects:
            try:
                msg = await js.get_last_msg(STATE_STREAM, subject)
                doc = json.loads(msg.data or b"{}")
            except (NotFoundError, ValueError):
                continue
            if not isinstance(doc, dict):
                continue
            age = None if msg.time is None else max(0.0, time.time() - msg.time.timestamp())
            rigs[subject.split(".")[1]] = (doc, age)
        bucket_info = None
        try:
            store = await js.object_store(bucket)
            st = await store.status()
            bucket_info = {"bucket": bucket, "bytes": st.size}
        except BucketNotFoundError:
            pass
        return rigs, bucket_info
    finally:
        await _close(nc)


def _fleet_status(args: argparse.Namespace) -> int:
    from rich.text import Text

    from wrtfd.daemon.fleet_view import render_fleet_status
    from wrtfd.daemon.status_view import format_bytes

    options, bucket = _options(args)
    rigs, bucket_info = _run(_fleet_status_docs(options, bucket), options.shown)
    if args.json:
        out: Mapping[str, Any] = {
            "rigs": {name: {**doc, "age_s": age} for name, (doc, age) in sorted(rigs.items())},
            "bucket": bucket_info,
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    console = _console()
    console.print(render_fleet_status(rigs, url=options.shown))
    if bucket_info is not None:
        console.print(Text(f"bucket {bucket}: {format_bytes(bucket_info['bytes'])} stored"))
    return 0
