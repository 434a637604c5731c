"""CAN over SLCAN through a real pty: a real car's bus (Subaru, 82,558 frames in 90 s) replayed.

The device side is a fake Lawicel adapter: it answers each command with ``\\r`` and streams the
candump log as SLCAN lines (with the adapter's minute-wrapping ms timestamps) only after it was
opened, at the log's own pace or ten times faster. Every frame must be decoded (values equal to
cantools decoding the same frame directly) or counted with a reason; none may go missing.

The whole log is replayed ten times faster; at the car's own pace (what stresses the source is
the rate, about 920 frames/s, not the length) a 12 s slice that spans the adapter clock's
minute wrap.
"""

from __future__ import annotations

import collections
from pathlib import Path

import anyio
import cantools
import pytest

from tests.sources.serial_pty import PtyDevice, Responder, wait_until
from wrtfd.decoders.base import Sample
from wrtfd.decoders.can_dbc import CanFrame
from wrtfd.decoders.candump import iter_candump
from wrtfd.decoders.slcan import SlcanDecoder, encode_slcan
from wrtfd.sources.base import SourceState
from wrtfd.sources.serial import SerialSettings
from wrtfd.sources.slcan import SlcanSource

pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")


@pytest.fixture(scope="module")
def subaru(shared_data: Path) -> tuple[Path, list[CanFrame]]:
    base = shared_data / "can" / "subaru"
    return base / "sample_can_spec.dbc", list(iter_candump(base / "can_sample.log"))


def expected_from_cantools(
    dbc: Path, frames: list[CanFrame], mapping: dict[str, str], clock_t0_ns: int | None = None
) -> tuple[list[dict[str, object]], list[int], collections.Counter[str]]:
    """What decoding each frame straight through cantools gives, and what must be counted
    (times in ms on the adapter's clock, which counts from ``clock_t0_ns``)."""
    db = cantools.database.load_file(str(dbc))
    assert isinstance(db, cantools.database.can.Database)
    by_message: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for channel, ref in mapping.items():
        message_name, _, signal = ref.partition(".")
        by_message[message_name].append((channel, signal))
    values: list[dict[str, object]] = []
    times_ms: list[int] = []
    drops: collections.Counter[str] = collections.Counter()
    t0 = frames[0].timestamp_ns if clock_t0_ns is None else clock_t0_ns
    assert t0 is not None
    for frame in frames:
        try:
            message = db.get_message_by_frame_id(frame.arbitration_id)
        except KeyError:
            drops["unmapped_id"] += 1
            continue
        try:
            decoded = db.decode_message(frame.arbitration_id, frame.data, decode_choices=False)
            assert isinstance(decoded, dict)
        except cantools.database.DecodeError:
            drops["wrong_size"] += 1
            continue
        values.append({channel: decoded[signal] for channel, signal in by_message[message.name]})
        times_ms.append((frame.timestamp_ns - t0) // 1_000_000)  # type: ignore[operator]
    return values, times_ms, drops


def slcan_chunks(
    frames: list[CanFrame], *, batch_s: float = 0.002, clock_t0_ns: int | None = None
) -> list[tuple[float, bytes]]:
    """The adapter's output: SLCAN lines with timestamps, grouped into writes every ``batch_s``.

    The adapter's clock counts from ``clock_t0_ns`` (default: the first frame's time)."""
    t0 = frames[0].timestamp_ns
    assert t0 is not None
    clock0 = t0 if clock_t0_ns is None else clock_t0_ns
    chunks: list[tuple[float, bytes]] = []
    current: list[bytes] = []
    current_slot = 0
    batch_ns = int(batch_s * 1e9)
    for frame in frames:
        offset_ns = frame.timestamp_ns - t0  # type: ignore[operator]
        slot = offset_ns // batch_ns
        if slot != current_slot and current:
            chunks.append((current_slot * batch_s, b"".join(current)))
            current = []
        current_slot = slot
        current.append(encode_slcan(frame, timestamp_ms=(frame.timestamp_ns - clock0) // 1_000_000))  # type: ignore[operator]
    if current:
        chunks.append((current_slot * batch_s, b"".join(current)))
    return chunks


def adapter_reply(command: bytes) -> bytes:
    return b"\r"  # Lawicel: CR acknowledges a command


async def replay(
    dbc: Path, frames: list[CanFrame], *, speed: float, clock_t0_ns: int | None = None
) -> tuple[list[Sample], SlcanSource, Responder]:
    device = PtyDevice()
    responder = Responder(device, adapter_reply)
    responder.start()
    decoder = SlcanDecoder(dbc=dbc)
    source = SlcanSource(
        "can",
        SerialSettings(path=device.path, baudrate=921600),
        decoder,
        bitrate=500_000,
        timestamps=True,
        command_gap_s=0.01,
    )
    samples: list[Sample] = []
    chunks = slcan_chunks(frames, clock_t0_ns=clock_t0_ns)
    total = sum(len(c) for _, c in chunks)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, samples.append)
            await wait_until(lambda: b"O" in responder.commands, timeout_s=5, what="the adapter opened")
            responder.stop.set()
            responder.join()
            await anyio.to_thread.run_sync(lambda: device.write_timed(chunks, speed=speed))
            await wait_until(lambda: source.stats.bytes >= total, timeout_s=60, what="all frames read")
            tg.cancel_scope.cancel()
    finally:
        device.close()
    return samples, source, responder


async def check_replay(
    subaru: tuple[Path, list[CanFrame]], speed: float, window_s: tuple[float, float] | None = None
) -> None:
    """Replay the log (or the frames in ``window_s`` of it, on the adapter clock of the whole
    log) and check every frame was decoded or counted."""
    dbc, frames = subaru
    assert len(frames) == 82_558
    log_t0 = frames[0].timestamp_ns
    assert log_t0 is not None
    if window_s is not None:
        lo, hi = (round(w * 1e9) for w in window_s)
        frames = [f for f in frames if lo <= f.timestamp_ns - log_t0 < hi]  # type: ignore[operator]
    samples, source, responder = await replay(dbc, frames, speed=speed, clock_t0_ns=log_t0)

    assert responder.commands == [b"", b"", b"", b"C", b"S6", b"Z1", b"O"]
    values, times_ms, drops = expected_from_cantools(dbc, frames, SlcanDecoder(dbc=dbc).can.mapping, log_t0)
    assert source.stats.received == len(frames)
    assert source.stats.dropped.as_dict() == dict(drops)
    assert len(samples) + source.stats.dropped.total() == len(frames)
    assert [s.values for s in samples] == values
    # The adapter's ms clock wraps every minute; unwrapped it follows the log's clock.
    first = samples[0].source_time_ns
    assert first is not None
    assert [(s.source_time_ns - first) // 1_000_000 for s in samples] == [t - times_ms[0] for t in times_ms]  # type: ignore[operator]
    assert source.stats.state is SourceState.STOPPED


async def test_subaru_replay_10x_faster(subaru: tuple[Path, list[CanFrame]]) -> None:
    await check_replay(subaru, speed=10.0)


async def test_subaru_replay_real_pace(subaru: tuple[Path, list[CanFrame]]) -> None:
    """12 s at the car's own pace (about 920 frames/s), across the adapter clock's minute wrap."""
    await check_replay(subaru, speed=1.0, window_s=(52.0, 64.0))
