"""The daemon's extra CPU for the live Foxglove server, with 0, 1 and several clients subscribed.

    python bench/bench_foxglove.py [--quick] [--seconds N] [--clients N]

Four daemons run side by side over the same window, all recording the same Forza 60 Hz + F1
2023 feed (``bench_daemon.py``'s, from the real captures) on loopback:

- ``no [foxglove]``: the baseline;
- ``[foxglove], no client``: the server up, nobody connected;
- ``[foxglove], 1 client``: one client subscribed to every topic;
- ``[foxglove], N clients``: N clients (``--clients``, default 4) subscribed to every topic.

Clients are threads of this process (their CPU is not counted) that read and count every message.
``rate_hz`` is the default 20 per recording group. CPU is read from ``/proc/<pid>/stat`` (utime +
stime of every thread, the SDK's own included) at the start and end of the window, as a
percentage of one core.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_daemon import feeder, start_daemon, status
from common import cpu_s, free_port

SUBPROTOCOL = "foxglove.sdk.v1"


class Client:
    """A Foxglove client subscribed to every advertised topic, counting what it receives."""

    def __init__(self, port: int) -> None:
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(
            connect(f"ws://127.0.0.1:{port}", subprotocols=[SUBPROTOCOL], proxy=None)
        )
        json.loads(self.ws.recv(timeout=10))  # serverInfo
        channels = json.loads(self.ws.recv(timeout=10))["channels"]
        subs = [{"id": i, "channelId": c["id"]} for i, c in enumerate(channels)]
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
        self.messages = 0
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                raw = self.ws.recv(timeout=0.5)
            except TimeoutError:
                continue
            except Exception:
                return
            if isinstance(raw, bytes):
                self.messages += 1
                self.bytes += len(raw)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._stack.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 s window instead of 30 s")
    ap.add_argument("--seconds", type=float, help="measurement window")
    ap.add_argument("--clients", type=int, default=4, help="clients of the last daemon (default 4)")
    args = ap.parse_args()
    window_s = args.seconds or (10.0 if args.quick else 30.0)
    warmup_s = 4.0
    kinds = [
        ("off", "no [foxglove]", 0, False),
        ("fox0", "[foxglove], no client", 0, True),
        ("fox1", "[foxglove], 1 client", 1, True),
        ("foxN", f"[foxglove], {args.clients} clients", args.clients, True),
    ]
    with tempfile.TemporaryDirectory(prefix="wrtfd-bench-fox-") as tmpdir:
        tmp = Path(tmpdir)
        procs: dict[str, subprocess.Popen[bytes]] = {}
        targets: list[tuple[int, int]] = []
        status_ports: dict[str, int] = {}
        fox_ports: dict[str, int] = {}
        clients: dict[str, list[Client]] = {}
        stop = threading.Event()
        feed: threading.Thread | None = None
        try:
            for key, _, _, fox in kinds:
                extra = ""
                if fox:
                    fox_ports[key] = free_port(socket.SOCK_STREAM)
                    extra = f"[foxglove]\nport = {fox_ports[key]}\n"
                proc, fz, f1, st = start_daemon(tmp, key, extra)
                procs[key] = proc
                targets.append((fz, f1))
                status_ports[key] = st
            seconds = warmup_s + window_s + 1
            feed = threading.Thread(target=feeder, args=(targets, seconds, stop))
            feed.start()
            time.sleep(1.0)  # sessions have started: every topic is advertised
            for key, _, n, _ in kinds:
                clients[key] = [Client(fox_ports[key]) for _ in range(n)]
            time.sleep(warmup_s - 1.0)
            before = {k: cpu_s(p.pid) for k, p in procs.items()}
            got_before = {k: sum(c.messages for c in cs) for k, cs in clients.items()}
            t0 = time.monotonic()
            time.sleep(window_s)
            elapsed = time.monotonic() - t0
            after = {k: cpu_s(p.pid) for k, p in procs.items()}
            got = {k: sum(c.messages for c in cs) - got_before[k] for k, cs in clients.items()}
            snaps = {k: status(p) for k, p in status_ports.items()}
        finally:
            stop.set()
            if feed is not None:
                feed.join()
            for cs in clients.values():
                for c in cs:
                    c.close()
            for p in procs.values():
                p.terminate()
            for p in procs.values():
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
    pct = {k: 100.0 * (after[k] - before[k]) / elapsed for k in before}
    print(f"wrtfd daemon CPU with the live Foxglove server, {window_s:.0f} s window,")
    print("Forza 60 Hz + F1 2023 60 Hz (5 packets/frame) on loopback, [foxglove] rate_hz = 20")
    print()
    header = f"{'daemon':<28}{'CPU %':>8}{'vs off':>8}{'+ CPU %':>9}{'frames':>8}{'msgs/s/client':>15}"
    print(header)
    base = pct["off"] if pct["off"] > 0 else float("nan")
    for key, label, n, _ in kinds:
        frames = snaps[key]["recorder"]["frames"]  # type: ignore[index]
        per_client = f"{got[key] / n / elapsed:.1f}" if n else "-"
        print(
            f"{label:<28}{pct[key]:>8.2f}{pct[key] / base:>8.2f}{pct[key] - pct['off']:>9.2f}"
            f"{frames:>8}{per_client:>15}"
        )
    fox = snaps["foxN"].get("foxglove", {})
    assert isinstance(fox, dict)
    print()
    print(
        f"{args.clients}-client daemon: messages published {fox.get('messages_published')},"
        f" frames published {fox.get('frames_published')} of {fox.get('frames_seen')} seen,"
        f" dropped {fox.get('dropped')}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
