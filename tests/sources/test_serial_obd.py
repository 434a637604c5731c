"""OBD-II through a fake ELM327 on a real pty.

The fake behaves like the chip as far as a logger sees it: echo on until ``ATE0``, ``ATZ``
answers with its version, the first request after ``ATSP0`` is prefixed by ``SEARCHING...``,
every answer comes after 2-20 ms, about one request in eight answers ``NO DATA``, and each
answer ends with the ``>`` prompt. It records the bytes it answered, so the test checks each
decoded value against the J1979 formula applied to exactly those bytes.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from tests.sources.serial_pty import PtyDevice, Responder, wait_until
from wrtfd.decoders.base import Sample
from wrtfd.decoders.obd import PIDS, ObdDecoder
from wrtfd.sources.base import SourceState
from wrtfd.sources.elm327 import Elm327Source
from wrtfd.sources.serial import SerialSettings

POLLED = (0x0C, 0x0D, 0x11, 0x05, 0x0F, 0x10)


class FakeElm327:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.echo = True
        self.searched = False
        self.silent = False
        self.answers: list[tuple[int, bytes | None]] = []  # (pid, data) or (pid, None) = NO DATA
        self.lock = threading.Lock()

    def answer(self, command: bytes) -> bytes | None:
        cmd = command.strip().upper()
        if cmd == b"ATZ":
            self.silent = False  # a reset cures a wedged adapter
        if self.silent or not cmd:
            return None
        time.sleep(self.rng.uniform(0.002, 0.02))
        echo = command + b"\r" if self.echo else b""
        if cmd == b"ATZ":
            self.echo = True
            self.searched = False
            return b"ATZ\r\r\rELM327 v1.5\r\r>"
        if cmd == b"ATE0":
            self.echo = False
            return echo + b"OK\r\r>"
        if cmd.startswith(b"AT"):
            return echo + b"OK\r\r>"
        if cmd.startswith(b"01") and len(cmd) == 4:
            pid = int(cmd[2:], 16)
            prefix = b"" if self.searched else b"SEARCHING...\r"
            self.searched = True
            with self.lock:
                if pid not in PIDS or self.rng.random() < 0.125:
                    self.answers.append((pid, None))
                    return echo + prefix + b"NO DATA\r\r>"
                data = bytes(self.rng.randrange(256) for _ in range(PIDS[pid].size))
                self.answers.append((pid, data))
            return echo + prefix + b"41%02X" % pid + data.hex().upper().encode() + b"\r\r>"
        return echo + b"?\r\r>"


async def run_elm(
    fake: FakeElm327,
    until: Callable[[Elm327Source, list[Sample]], Awaitable[None]],
    **options: Any,
) -> tuple[list[Sample], Elm327Source, Responder]:
    device = PtyDevice()
    responder = Responder(device, fake.answer)
    responder.start()
    source = Elm327Source(
        "obd",
        SerialSettings(path=device.path, baudrate=38400, reopen_min_s=0.05),
        ObdDecoder(pids=POLLED),
        **options,
    )
    samples: list[Sample] = []
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, samples.append)
            await until(source, samples)
            tg.cancel_scope.cancel()
    finally:
        responder.stop.set()
        device.close()
        responder.join()
    return samples, source, responder


async def test_fake_elm327_values_decoded_per_j1979() -> None:
    fake = FakeElm327(seed=1979)
    snapshot: dict[str, object] = {}

    async def until(source: Elm327Source, samples: list[Sample]) -> None:
        def settled() -> bool:
            with fake.lock:
                n = len(fake.answers)
                if n < 80 or source.stats.received != n:
                    return False
                snapshot["answers"] = list(fake.answers)
                snapshot["samples"] = list(samples)
                snapshot["dropped"] = source.stats.dropped.as_dict()
                return True

        await wait_until(settled, timeout_s=30, what="80 answers decoded")

    _, source, responder = await run_elm(fake, until)
    answers: list[tuple[int, bytes | None]] = snapshot["answers"]  # type: ignore[assignment]
    samples: list[Sample] = snapshot["samples"]  # type: ignore[assignment]

    assert responder.commands[:6] == [b"ATZ", b"ATE0", b"ATL0", b"ATS0", b"ATH0", b"ATSP0"]
    assert responder.commands[6:12] == [b"01%02X" % pid for pid in POLLED]
    expected = [{PIDS[pid].channel: PIDS[pid].formula(data)} for pid, data in answers if data is not None]
    assert [s.values for s in samples] == expected
    no_data = sum(1 for _, data in answers if data is None)
    assert no_data > 0
    assert snapshot["dropped"] == {"no_data": no_data}
    assert source.adapter_version == "ELM327 v1.5"
    # Spot-check the formulas on values the fake really sent.
    for sample, (pid, data) in zip(samples, [a for a in answers if a[1] is not None], strict=True):
        assert data is not None
        if pid == 0x0C:
            assert sample.values["engine_rpm"] == (data[0] * 256 + data[1]) / 4
        elif pid == 0x05:
            assert sample.values["coolant_temp_c"] == data[0] - 40


async def test_wedged_adapter_times_out_and_is_reinitialised() -> None:
    fake = FakeElm327(seed=7)

    async def until(source: Elm327Source, samples: list[Sample]) -> None:
        await wait_until(lambda: len(samples) >= 5, timeout_s=20, what="first samples")
        fake.silent = True  # stops answering anything but ATZ
        await wait_until(lambda: source.stats.restarts >= 1, timeout_s=20, what="reconnect after timeouts")
        before = len(samples)
        await wait_until(lambda: len(samples) >= before + 5, timeout_s=20, what="samples after re-init")

    _, source, responder = await run_elm(
        fake, until, response_timeout_s=0.15, search_timeout_s=0.5, max_timeouts=3
    )
    assert source.stats.dropped.as_dict()["timeout"] == 3
    assert source.stats.restarts == 1
    assert responder.commands.count(b"ATZ") == 2
    assert source.stats.state is SourceState.STOPPED
