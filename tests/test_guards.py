"""The guards of tests/conftest.py fail what they promise to fail (run on a small inner suite)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

INNER = """
import asyncio
import socket
import threading

import pytest

from tests.format.samples import write_car_file
from wrtfd.format import validate_file
from wrtfd.sources.serial import resolve_device


def test_clean(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
    assert True


def test_leaks_a_socket():
    test_leaks_a_socket.kept = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def test_leaks_a_thread():
    done = threading.Event()
    threading.Thread(target=done.wait, args=(4.0,), name="left-behind").start()


async def test_leaks_a_task():
    asyncio.get_running_loop().create_task(asyncio.sleep(30), name="forgotten")


async def test_blocks_the_loop(tmp_path):
    write_car_file(tmp_path / "run.wrtf")  # test code may block: only loop code is watched
    validate_file(tmp_path / "run.wrtf")  # offline library code: not what runs on the loop
    (tmp_path / "ttyX").symlink_to(tmp_path / "run.wrtf")
    resolve_device(str(tmp_path / "ttyX"))  # a source reading a symlink on the loop's thread


@pytest.mark.allow_leaks
def test_allowed_to_leak():
    test_allowed_to_leak.kept = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
"""


@pytest.mark.allow_leaks  # the inner suite leaks on purpose, in this process
def test_the_guards_fail_leaks_and_blocking(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
        "markers =\n    allow_leaks: x\n    allow_blocking: x\n"
    )
    pytester.makeconftest("from tests.conftest import no_blocking_in_loop, no_leaks  # noqa: F401\n")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest("-p", "no:cacheprovider", "-q")
    out = result.stdout.str()
    assert "sockets left open" in out
    assert "threads left running: ['left-behind']" in out
    assert "asyncio tasks left running" in out and "sleep" in out
    assert "BlockingError: Blocking call to os." in out  # realpath's lstat/readlink
    assert '>       resolve_device(str(tmp_path / "ttyX"))' in out  # the call that blocked
    assert ">       validate_file(" not in out  # offline code called by the test: not flagged
    # the three leaking tests pass, then error in teardown; the blocking one fails
    result.assert_outcomes(passed=5, failed=1, errors=3)
    assert "test_inner.py::test_allowed_to_leak" not in out.split("short test summary")[-1]
