"""sd_notify client against real unix datagram sockets (path and abstract)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from wrtfd.daemon.notify import MAX_STATUS_CHARS, Notifier, watchdog_interval_s


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(2)
    yield sock, str(path)
    sock.close()


def test_messages_reach_the_socket(notify_socket: tuple[socket.socket, str]) -> None:
    sock, path = notify_socket
    with Notifier({"NOTIFY_SOCKET": path}) as n:
        assert n.enabled
        assert n.ready("2/2 sources up")
        assert sock.recv(4096) == b"READY=1\nSTATUS=2/2 sources up"
        assert n.watchdog()
        assert sock.recv(4096) == b"WATCHDOG=1"
        assert n.status("line one\nline two")
        assert sock.recv(4096) == b"STATUS=line one line two"
        n.status("x" * 1000)
        assert sock.recv(4096) == b"STATUS=" + b"x" * MAX_STATUS_CHARS
        assert n.stopping()
        assert sock.recv(4096) == b"STOPPING=1"
        assert n.sent == 5


def test_abstract_socket() -> None:
    name = f"wrtfd-test-{os.getpid()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    sock.settimeout(2)
    try:
        with Notifier({"NOTIFY_SOCKET": "@" + name}) as n:
            assert n.ready()
        assert sock.recv(4096) == b"READY=1"
    finally:
        sock.close()


def test_no_socket_is_a_no_op() -> None:
    n = Notifier({})
    assert not n.enabled
    assert not n.ready()
    assert n.sent == 0


def test_gone_socket_is_counted_not_raised(tmp_path: Path) -> None:
    n = Notifier({"NOTIFY_SOCKET": str(tmp_path / "missing.sock")})
    assert n.enabled
    assert not n.watchdog()
    assert n.failed == 1


def test_watchdog_interval() -> None:
    assert watchdog_interval_s({"WATCHDOG_USEC": "10000000"}) == 10.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "123"}, pid=123) == 4.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "123"}, pid=99) is None
    assert watchdog_interval_s({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_interval_s({"WATCHDOG_USEC": "abc"}) is None
    assert watchdog_interval_s({}) is None
