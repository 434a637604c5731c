"""sd_notify: tell systemd we are ready, alive, what we are doing, and that we are stopping.

The protocol is one datagram of ``KEY=VALUE`` lines to the unix socket named by
``$NOTIFY_SOCKET`` (a path, or ``@name`` for an abstract socket). Without that variable every
call is a no-op, so the daemon runs the same under systemd, in a terminal or in tests.

Sends are non-blocking: if systemd's queue is full the message is dropped rather than stalling
the event loop (systemd only needs the latest STATUS, and a missed WATCHDOG is retried at the
next beat).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

__all__ = ["Notifier", "watchdog_interval_s"]

#: STATUS= lines longer than this are cut (systemd shows one line in ``systemctl status``).
MAX_STATUS_CHARS = 200


def _address(value: str) -> str | bytes | None:
    if not value:
        return None
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None  # vsock and other forms are not supported


def watchdog_interval_s(env: Mapping[str, str], pid: int | None = None) -> float | None:
    """The watchdog timeout systemd set for *this* process (``WATCHDOG_USEC``), or None."""
    usec = env.get("WATCHDOG_USEC", "")
    owner = env.get("WATCHDOG_PID", "")
    if owner and owner.isdigit() and int(owner) != (os.getpid() if pid is None else pid):
        return None
    if not usec.isdigit() or int(usec) == 0:
        return None
    return int(usec) / 1e6


class Notifier:
    """A connection-less sd_notify client; ``enabled`` is False when not under systemd."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        environ = os.environ if env is None else env
        self._address = _address(environ.get("NOTIFY_SOCKET", ""))
        self._sock: socket.socket | None = None
        self.sent = 0
        self.failed = 0
        if self._address is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            sock.setblocking(False)
            self._sock = sock

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def notify(self, **fields: str | int) -> bool:
        """Send ``KEY=value`` lines (keys upper-cased); returns whether the datagram went out."""
        if self._sock is None or self._address is None:
            return False
        lines = []
        for key, value in fields.items():
            text = str(value).replace("\n", " ")
            if key.upper() == "STATUS":
                text = text[:MAX_STATUS_CHARS]
            lines.append(f"{key.upper()}={text}")
        try:
            self._sock.sendto("\n".join(lines).encode(), self._address)
        except OSError:
            # systemd gone or its queue full: never worth blocking or crashing the daemon for.
            self.failed += 1
            return False
        self.sent += 1
        return True

    def ready(self, status: str | None = None) -> bool:
        return self.notify(READY=1, **({"STATUS": status} if status else {}))

    def status(self, text: str) -> bool:
        return self.notify(STATUS=text)

    def watchdog(self) -> bool:
        return self.notify(WATCHDOG=1)

    def stopping(self, status: str | None = None) -> bool:
        return self.notify(STOPPING=1, **({"STATUS": status} if status else {}))

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> Notifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
