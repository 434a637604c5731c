"""``wrtfd run``: one anyio task group of sources, the recorder, the status server and signals.

Order of life:

1. config validated and every decoder, definition and source built (:mod:`wiring`) before
   anything touches the disk or the network: a bad config exits 2 and creates nothing;
2. the recorder's live driver starts, then every source under its supervisor (a failing source is
   restarted with backoff, never takes the others down), then the status server;
3. ``READY=1`` once every source is bound (or has reported its failure), then the heartbeat:
   ``WATCHDOG=1`` only while the loop turns *and* the recorder is not stuck, ``STATUS=`` summary;
4. SIGHUP ends the current sessions and starts new ones; SIGUSR1 puts a marker in every group
   that records (as ``POST /api/mark`` does); SIGTERM/SIGINT: ``STOPPING=1``, the page's
   streams end (pages reconnect to the next daemon), sources stop, the recorder finalizes every
   session and file within ``shutdown_timeout_s``; a second SIGINT exits at once (the files on
   disk stay recoverable by ``wrtfd repair``).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from wrtfd import __version__
from wrtfd.daemon.config import load_effective_config
from wrtfd.daemon.journal import start_journal
from wrtfd.daemon.logs import configure_logging
from wrtfd.daemon.notify import Notifier, watchdog_interval_s
from wrtfd.daemon.pipeline import Pipeline, SourceHandle
from wrtfd.daemon.status import UP_STATES, health_problems
from wrtfd.daemon.supervise import supervise
from wrtfd.daemon.watch import LifecycleWatch
from wrtfd.daemon.wiring import gnss_lap_plugins, prepare
from wrtfd.errors import ConfigError
from wrtfd.recorder.markers import TooManyMarkersError

if TYPE_CHECKING:
    from wrtfd.daemon.foxglove_live import FoxgloveLive
    from wrtfd.daemon.web.server import StatusServer

__all__ = ["Daemon", "run_daemon"]

log = logging.getLogger("wrtfd")

#: Exit codes: 0 clean stop, 1 failure at run time, 2 bad config (raised before we get here),
#: 3 stopped on request but a recording file failed on the way (a write error: ENOSPC, EACCES...;
#: its frames since the error are lost). Under systemd ``Restart=on-failure`` a 3 from
#: ``systemctl stop`` stays stopped (the unit shows failed); a 3 after any other SIGTERM restarts.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_WRITE_FAILED = 3
EXIT_INTERRUPTED = 130

DISK_REFRESH_S = 5.0
STATUS_NOTIFY_S = 2.0
STATUS_RETRY_S = 5.0
#: A source that neither binds nor fails within this long does not hold up READY=1.
SOURCES_READY_TIMEOUT_S = 20.0
#: At stop, the fleet gets this long to queue the last files and send the last status (plus
#: ``fleet.stop_upload_s`` for the queued uploads, see FleetPublisher.close).
FLEET_CLOSE_S = 1.5


class Daemon:
    """Runs a :class:`Pipeline`; :meth:`main` is the whole life after preparation."""

    def __init__(self, pipeline: Pipeline, *, web_token: str | None = None) -> None:
        self.loaded = pipeline.loaded
        #: The token changes need when the page listens off loopback ([web] token or generated).
        self.web_token = web_token
        #: Every group's recorder publishes here; the journal, the page, the fleet... observe it.
        self.hub = pipeline.hub
        # Source and disk state changes, for the journal (wrtfd.daemon.journal) and observers.
        self.watch = LifecycleWatch(
            self.hub, {h.source.name: h.config.silent_after_s for h in pipeline.handles}
        )
        self.config = pipeline.loaded.config
        self.handles = pipeline.handles
        self.recorder = pipeline.recorder
        self.tap = pipeline.tap
        self.output_dir = pipeline.output_dir
        self.env: Mapping[str, str] = os.environ if pipeline.env is None else pipeline.env
        self.notifier = Notifier(self.env)
        self.watchdog_s = watchdog_interval_s(self.env)
        self.started_s = time.monotonic()
        self.disk: dict[str, Any] = {"path": str(self.output_dir)}
        self.status_server: StatusServer | None = None
        self.shutdown = anyio.Event()
        self._all_ready = anyio.Event()
        self.signals_seen: dict[str, int] = {}
        self.watchdog_sent = 0
        self.exit_code = EXIT_OK
        # [foxglove] (issue 16): the live Foxglove server; built here, so a missing extra fails
        # before anything is created.
        self.foxglove: FoxgloveLive | None = None
        if self.config.foxglove.enabled:
            from wrtfd.daemon.foxglove_live import FoxgloveLive

            schemas = {g: live.recorder.schema for g, live in self.recorder.groups.items()}
            self.foxglove = FoxgloveLive(self.config.foxglove, schemas, self.hub)
        #: The fleet publisher (``[fleet]``, issue 18): an observer of the hub with a thread of its own.
        self.fleet = pipeline.fleet
        #: Lap records beside the recordings (``laps.jsonl``), an observer of the hub.
        self.laps = pipeline.laps

    # --- snapshot for /status, /metrics, /healthz and STATUS= --------------------------------

    def snapshot(self) -> dict[str, Any]:
        sources: dict[str, Any] = {}
        for h in self.handles:
            snap = h.source.stats.snapshot()
            snap.update(
                kind=h.config.kind,
                protocol=h.config.protocol,
                address=h.address,
                required=h.config.required,
                silent_after_s=h.config.silent_after_s,
                rate_hz=round(h.rate.rate, 2),
            )
            sources[h.source.name] = snap
        rec = dict(self.recorder.stats_snapshot())
        rec["current_file"] = rec.get("file")
        snap_all: dict[str, Any] = {
            "version": __version__,
            "pid": os.getpid(),
            "config": self.loaded.origin,
            "uptime_s": round(time.monotonic() - self.started_s, 3),
            "sources": sources,
            "recorder": rec,
            "disk": dict(self.disk),
            "time_us": time.time_ns() // 1000,
        }
        if self.foxglove is not None:
            snap_all["foxglove"] = self.foxglove.snapshot()
        if self.status_server is not None:
            snap_all["web"] = self.status_server.stats()
        if self.fleet is not None:
            snap_all["fleet"] = self.fleet.snapshot()
        if self.tap is not None:
            snap_all["tap"] = self.tap.snapshot()
        problems = health_problems(snap_all)
        snap_all["healthy"] = not problems
        snap_all["problems"] = problems
        return snap_all

    def status_line(self, snap: Mapping[str, Any] | None = None) -> str:
        s = self.snapshot() if snap is None else snap
        up = sum(1 for src in s["sources"].values() if src["state"] in UP_STATES)
        rec = s["recorder"]
        current = rec.get("current_file")
        where = f"file {Path(current).name}" if current else "no file open"
        fps = float(rec.get("frame_rate_hz") or 0.0)
        text = f"{up}/{len(s['sources'])} sources up, {fps:.0f} frames/s, {where}"
        if rec.get("state") != "ok":
            text += f", recorder {rec['state']}"
        fleet_problem = self.fleet.problem() if self.fleet is not None else None
        if fleet_problem:
            text += f", fleet {fleet_problem}"
        return text

    # --- tasks ---------------------------------------------------------------------------------

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(
            signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1
        ) as received:
            async for signum in received:
                name = signal.Signals(signum).name
                self.signals_seen[name] = self.signals_seen.get(name, 0) + 1
                if signum == signal.SIGHUP:
                    log.info("SIGHUP: ending the current sessions and starting new ones")
                    self.recorder.request_new_session()
                elif signum == signal.SIGUSR1:
                    try:
                        marked = self.mark("SIGUSR1")
                    except TooManyMarkersError as exc:
                        log.warning("SIGUSR1: marker refused: %s", exc, extra={"rate_key": "sigusr1-mark"})
                        continue
                    log.info(
                        "SIGUSR1: marker in %s",
                        ", ".join(f"{g} at tick {t}" for g, t in marked.items())
                        or "no group (nothing is being recorded)",
                    )
                elif self.shutdown.is_set():
                    if signum == signal.SIGINT:
                        log.warning(
                            "second SIGINT: exiting now; files on disk are recoverable (wrtfd repair)"
                        )
                        logging.shutdown()
                        os._exit(EXIT_INTERRUPTED)
                else:
                    log.info("%s: stopping", name)
                    self.shutdown.set()

    # --- what the web server may ask for (wrtfd.daemon.web.routes.Actions) -------------------

    def mark(self, note: str) -> dict[str, int]:
        """:raises TooManyMarkersError: too many markers wait (the web server answers 429)."""
        return dict(self.recorder.mark(note))

    def new_session(self) -> None:
        self.recorder.request_new_session()

    def start_finish(self, width_m: float = 30.0) -> list[str]:
        """Ask every GNSS lap plug-in to lay its start/finish line at the car's next fix
        (``wrtfd mark --start-finish``); the sources asked (empty: none times GNSS laps)."""
        asked = []
        for live in self.recorder.groups.values():
            for d in gnss_lap_plugins(live.recorder.derived):
                d.request_line(width_m)
                asked.append(d.source)
        return asked

    def _refresh_disk(self) -> None:
        try:
            usage = shutil.disk_usage(self.output_dir)
        except OSError as exc:
            self.disk = {"path": str(self.output_dir), "error": exc.strerror or str(exc)}
            return
        self.disk = {
            "path": str(self.output_dir),
            "free_bytes": usage.free,
            "total_bytes": usage.total,
            "min_free_bytes": int(self.config.status.min_free_mb * (1 << 20)),
        }

    def _log_drops(self) -> None:
        for h in self.handles:
            current = h.source.stats.dropped.as_dict()
            new = {
                k: v - h.logged_drops.get(k, 0) for k, v in current.items() if v > h.logged_drops.get(k, 0)
            }
            if not new:
                continue
            h.logged_drops = current
            detail = ", ".join(f"{k}={v}" for k, v in sorted(new.items()))
            log.warning(
                "source %s dropped %d input(s): %s",
                h.source.name,
                sum(new.values()),
                detail,
                extra={"rate_key": f"drops:{h.source.name}"},
            )

    async def _heartbeat(self) -> None:
        """The only sender of WATCHDOG=1: it runs only if the loop runs, and checks the recorder."""
        beat_s = 1.0 if self.watchdog_s is None else min(1.0, self.watchdog_s / 4)
        last_disk = last_status = -1e9
        was_stuck = False
        while True:
            now = time.monotonic()
            for h in self.handles:
                h.rate.update(h.source.stats.samples, now)
            wall_us = time.time_ns() // 1000
            if now - last_disk >= DISK_REFRESH_S:
                last_disk = now
                await anyio.to_thread.run_sync(self._refresh_disk)
                self.watch.check_disk(self.disk, wall_us)
            last_rx = {h.source.name: h.source.stats.last_rx_ns for h in self.handles}
            self.watch.check_sources(last_rx, time.monotonic_ns(), wall_us)
            self._log_drops()
            # Only the recorder's counters each beat; the whole snapshot (every source, health)
            # only when a STATUS= line is really sent: the beat runs for the daemon's whole life.
            rec = self.recorder.stats_snapshot()
            # Stalled (a write pending too long) is what the watchdog is for: systemd restarts us.
            # A failing disk (ENOSPC) is not a wedge: the recorder retries, /healthz reports it.
            stuck = rec["state"] == "stalled"
            if stuck != was_stuck:
                was_stuck = stuck
                if stuck:
                    log.error("recorder %s: %s; withholding the watchdog", rec["state"], rec["error"])
                else:
                    log.info("recorder is writing again")
            if self.watchdog_s is not None and not stuck:
                self.notifier.watchdog()
                self.watchdog_sent += 1
            if now - last_status >= STATUS_NOTIFY_S and self.notifier.enabled:
                last_status = now
                self.notifier.status(self.status_line())
            await anyio.sleep(beat_s)

    async def _wait_sources_ready(self) -> None:
        with anyio.move_on_after(SOURCES_READY_TIMEOUT_S) as scope:
            await self._all_ready.wait()
        if scope.cancelled_caught:
            late = ", ".join(h.source.name for h in self.handles if not h.ready)
            log.warning(
                "sources not ready after %.0f s (%s); reporting ready anyway", SOURCES_READY_TIMEOUT_S, late
            )

    async def main(self) -> int:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self._refresh_disk()
        log.info(
            "wrtfd %s starting: config %s, recording into %s",
            __version__,
            self.loaded.origin,
            self.output_dir,
        )
        # the lifecycle lines: files, sessions, sources, disk
        journal = start_journal(self.hub, interval_s=self.config.logging.repeat_interval_s)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._signals)
            if self.tap is not None:
                self.tap.start()  # before the sources: it takes their input from the first one
            if self.laps is not None:
                self.laps.start()
            if self.fleet is not None:  # before the recorder: it must see every file open
                self.fleet.start()
                tg.start_soon(self.fleet.run_status, self.snapshot)
            await tg.start(self.recorder.run)
            async with anyio.create_task_group() as sources_tg:
                for h in self.handles:
                    sources_tg.start_soon(self._supervise, h)
                await self._wait_sources_ready()
                if self.config.status.enabled:
                    await tg.start(self._serve_status)
                if self.foxglove is not None:
                    await tg.start(self.foxglove.run)
                tg.start_soon(self._heartbeat)
                line = self.status_line()
                self.notifier.ready(line)
                log.info("ready: %s", line)
                await self.shutdown.wait()
                self.notifier.stopping("stopping: finalizing files")
                if self.status_server is not None:
                    await self.status_server.aclose()
                sources_tg.cancel_scope.cancel()
            await self._finalize()
            await self._close_tap()
            tg.cancel_scope.cancel()
        journal.flush(final=True)  # the last files closed by the writer thread
        self.notifier.close()
        return self.exit_code

    async def _serve_status(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The status server and the page; if its port is taken, recording goes on and the
        bind is retried."""
        from wrtfd.daemon.web.server import web_server

        st = self.config.status
        # Built off the loop: it reads (or creates) the token file and the page's assets.
        self.status_server = server = await anyio.to_thread.run_sync(
            web_server, self, self.config, self.web_token
        )
        if server.broadcaster is not None:
            self.hub.add(server.broadcaster.view)
        reported = False
        async with anyio.create_task_group() as tg:
            if server.broadcaster is not None:
                tg.start_soon(server.broadcaster.run)
            while True:
                try:
                    port = await server.serve_until_bound()
                except OSError as exc:
                    log.error(
                        "status endpoint: cannot listen on %s:%d: %s; recording goes on, retrying",
                        st.host,
                        st.port,
                        exc.strerror or exc,
                        extra={"rate_key": "status-bind"},
                    )
                    if not reported:
                        reported = True
                        task_status.started()
                    await anyio.sleep(STATUS_RETRY_S)
                    continue
                log.info(
                    "status on http://%s:%d/status, the page on http://%s:%d/", st.host, port, st.host, port
                )
                if not reported:
                    reported = True
                    task_status.started()
                await server.serve_forever()
                tg.cancel_scope.cancel()
                return

    async def _supervise(self, h: SourceHandle) -> None:
        def ready() -> None:
            h.ready = True
            if all(other.ready for other in self.handles):
                self._all_ready.set()

        await supervise(h.source, h.sink, h.backoff, on_ready=ready)

    async def _close_tap(self) -> None:
        """After the recorder closed its files (so did the tap's, on their events): write what the
        tap holds and close it, off the loop, within the shutdown timeout."""
        tap = self.tap
        if tap is None:
            return
        timeout_s = self.config.daemon.shutdown_timeout_s
        if not await anyio.to_thread.run_sync(tap.close, timeout_s):
            log.error("raw tap: not closed within %.1f s; its last file may end with a torn block", timeout_s)

    async def _finalize(self) -> None:
        timeout_s = self.config.daemon.shutdown_timeout_s
        began = time.monotonic()
        with anyio.move_on_after(timeout_s) as scope:
            await self.recorder.stop()
        took = time.monotonic() - began
        if scope.cancelled_caught:
            # The writer thread is stuck in the kernel (a hung disk) and cannot be cancelled:
            # waiting longer only delays systemd's SIGKILL. What is on disk is recoverable.
            log.error(
                "recorder did not finish within %.1f s; exiting, the file is left for wrtfd repair", timeout_s
            )
            self.notifier.close()
            logging.shutdown()
            os._exit(EXIT_FAILURE)
        else:
            rec = self.recorder.stats_snapshot()
            if rec.get("errors"):
                # A file failed on the way: saying "every file finalized" and exiting 0 would lie.
                log.error(
                    "stopped in %.2f s, but %d write error(s) (last: %s); %d frame(s) were not"
                    " written; the files that failed are named above",
                    took,
                    rec["errors"],
                    rec.get("error") or "unknown",
                    rec.get("frames_lost") or 0,
                )
                self.exit_code = EXIT_WRITE_FAILED
            else:
                log.info("stopped: every session and file finalized in %.2f s", took)
        if self.laps is not None:  # the last lap records written and fsynced
            await anyio.to_thread.run_sync(self.laps.close)
        if self.fleet is not None:  # the last files into the upload queue, the last events out
            await self.fleet.close(FLEET_CLOSE_S)


def run_daemon(config_path: Path | None) -> int:
    """Prepare (may raise ConfigError: exit 2, nothing created), then run until stopped."""
    loaded = load_effective_config(config_path)
    cfg = loaded.config.logging
    configure_logging(
        level=cfg.level, fmt=cfg.format, repeat_interval_s=cfg.repeat_interval_s, stream=sys.stderr
    )
    pipeline = prepare(loaded)  # everything config-dependent is built (or refused) before any I/O
    daemon = Daemon(pipeline)  # (refuses a missing extra: before anything is created)
    try:  # the first thing created
        pipeline.output_dir.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:  # a file in the way: the config's problem
        raise ConfigError(
            f"{loaded.origin}: recorder.output_dir: cannot create {pipeline.output_dir}:"
            f" {exc.strerror or exc}"
        ) from None
    except OSError as exc:  # no permission, a disk not mounted yet: systemd's restart tries again
        log.critical("recorder.output_dir: cannot create %s: %s", pipeline.output_dir, exc.strerror or exc)
        return EXIT_FAILURE
    try:
        return anyio.run(daemon.main, backend="asyncio")
    except Exception as exc:  # a bug: one line in the journal (traceback with WRTFD_DEBUG=1)
        if os.environ.get("WRTFD_DEBUG"):
            raise
        while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        log.critical("daemon failed: %s: %s", type(exc).__name__, exc)
        return EXIT_FAILURE
