"""Live: a publisher process streams a .zddsrec header and 10,000 frames of two topics over
loopback TCP at 1 kHz into the DDS source, while hostile connections send garbage and oversized
lengths. The good stream arrives whole and exact; the hostile ones are dropped with a reason.
The samples go through the live recorder (LiveRecorder, driven by the monotonic clock, placing
samples by the publisher's clock) and the WRTF file it writes is checked frame by frame.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import numpy as np

from wrtfd.decoders.base import Sample
from wrtfd.sources.dds import DdsSource
from wrtfd.zddsrec.format import encode_frame, encode_header
from wrtfd.zddsrec.mapping import MappingConfig, mapping_from_dict

N_FRAMES = 10_000
TIME_BASE_NS = 1_750_000_000_000_000_000

#: The publisher: its own process, its own encoder (struct), paced at 1 kHz by its own clock.
PUBLISHER = r"""
import socket, struct, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
def s(text):
    b = text.encode(); return struct.pack("<I", len(b)) + b
head = b"ZDDS" + struct.pack("<IqII", 1, TIME_BASE, 1, 2) + bytes(range(16)) + s("sim")
head += s("demo::Pose") + s("rt/pose") + s("demo::Status") + s("rt/status")
def frame(i):
    seq = i // 2
    if i % 2 == 0:
        body = struct.pack("<I4xd3f", seq, seq * 0.25, seq, -seq, 0.5)
    else:
        mode = ("m%d" % (seq % 5)).encode() + b"\0"
        body = struct.pack("<Ih2xI", seq, seq % 7 - 1, len(mode)) + mode
    payload = b"\x00\x01\x00\x00" + body
    return struct.pack("<BqIIBI", 0x46, i * 1_000_000, 0, i % 2, 0, len(payload)) + payload
sock = socket.create_connection(("127.0.0.1", port))
sock.sendall(head)
start = time.monotonic()
i = 0
while i < n:
    due = int((time.monotonic() - start) * 1000) + 1
    chunk = b"".join(frame(k) for k in range(i, min(due, n)))
    if chunk:
        sock.sendall(chunk)
        i = min(due, n)
    else:
        time.sleep(0.0005)
sock.shutdown(socket.SHUT_WR)
sock.recv(1)
sock.close()
""".replace("TIME_BASE", str(TIME_BASE_NS))

MAPPING = {
    "rate": {"hz": 1000},
    "source": {"name": "sim"},
    "types": {
        "Pose": {
            "members": [
                {"name": "seq", "type": "uint32"},
                {"name": "x", "type": "double"},
                {"name": "v", "type": "float[3]"},
            ]
        },
    },
    "topics": [
        {"topic": "rt/pose", "type": "Pose", "channels": {"seq": "pose_seq", "x": "x", "v": "v"}},
        {
            "topic": "rt/status",
            "type": {
                "members": [
                    {"name": "seq", "type": "uint32"},
                    {"name": "gear", "type": "int16"},
                    {"name": "mode", "type": "string<4>"},
                ]
            },
            "channels": {"seq": "status_seq", "gear": "gear", "mode": "mode"},
        },
    ],
}


def mapping() -> MappingConfig:
    return mapping_from_dict(MAPPING, base_dir=Path("."))


async def hostile(port: int) -> None:
    """Three bad peers: raw junk, a frame with a 3 GB length, an out-of-range topic index."""
    head = encode_header_for_hostile()
    for data in (
        b"GET / HTTP/1.1\r\n\r\n" * 10,
        head + b"F" + bytes(8) + bytes(4) + bytes(4) + b"\x00" + (3_000_000_000).to_bytes(4, "little"),
        head + encode_frame(0, 0, 7, 0, b"\x00\x01\x00\x00"),
    ):
        async with await anyio.connect_tcp("127.0.0.1", port) as s:
            await s.send(data)
            with anyio.fail_after(10):
                try:
                    while await s.receive():
                        pass
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    pass


def encode_header_for_hostile() -> bytes:
    from wrtfd.zddsrec.format import Header, ParticipantEntry, TopicEntry

    return encode_header(Header(0, (ParticipantEntry(bytes(16), "x"),), (TopicEntry("rt/pose", "Pose"),)))


async def test_publisher_process_at_1khz_with_hostile_peers(tmp_path: Path) -> None:
    from wrtfd.recorder import LiveRecorder, RecorderPolicy, SourceSpec

    cfg = mapping()
    got: list[Sample] = []
    src = DdsSource("sim", mapping=cfg, port=0)
    live = LiveRecorder(
        [SourceSpec(name="sim", definition=cfg.definition(), drives_frames=True, use_source_clock=True)],
        # A wide jitter window: on a shared CI machine the event loop can stall for more than the
        # default 0.1 s, and a sample later than the window is (rightly) a dropped tick.
        RecorderPolicy(output_dir=tmp_path, rate_hz=cfg.rate_hz, jitter_s=2.0),
    )

    def sink(sample: Sample) -> None:
        got.append(sample)
        live.sink(sample)

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            await tg.start(live.run)
            port = await tg.start(src.run, sink)
            proc = await anyio.open_process([sys.executable, "-c", PUBLISHER, str(port), str(N_FRAMES)])
            try:
                while len(got) < 1000:  # noqa: ASYNC110 - hit it while the good stream is flowing
                    await anyio.sleep(0.01)
                await hostile(port)
                assert len(got) < N_FRAMES  # the attack happened mid-stream
                while src.stats.received < N_FRAMES:
                    await anyio.sleep(0.01)
                    assert proc.returncode is None or proc.returncode == 0
            finally:
                await proc.aclose()
            await live.stop()
            tg.cancel_scope.cancel()
    assert proc.returncode == 0
    assert src.counters.disconnect_reasons["bad_magic"] == 1
    assert src.counters.disconnect_reasons["payload_too_large"] == 1
    assert src.counters.disconnect_reasons["topic_out_of_range"] == 1
    assert src.stats.dropped.as_dict() == {"bad_magic": 1, "payload_too_large": 1, "topic_out_of_range": 1}
    assert len(got) == N_FRAMES and src.stats.samples == N_FRAMES and live.intake_dropped == 0
    # every sample exact, in order, with the publisher's clock
    times = np.array([s.source_time_ns for s in got], dtype=np.int64)
    assert np.array_equal(times, TIME_BASE_NS + np.arange(N_FRAMES, dtype=np.int64) * 1_000_000)
    pose = [s.values for s in got[0::2]]
    status = [s.values for s in got[1::2]]
    assert [v["pose_seq"] for v in pose] == list(range(N_FRAMES // 2))
    assert all(v["x"] == v["pose_seq"] * 0.25 for v in pose)
    assert all(v["v"] == [float(v["pose_seq"]), -float(v["pose_seq"]), 0.5] for v in pose)
    assert [v["gear"] for v in status] == [k % 7 - 1 for k in range(N_FRAMES // 2)]
    assert status[3]["mode"] == [ord("m"), ord("3"), 0, 0]
    check_recording(tmp_path, live.stats_snapshot())


def check_recording(out_dir: Path, recorder_stats: object) -> None:
    """The WRTF file: one frame per 1 ms tick of the publisher's clock, values held per topic."""
    from wrtfd.format import Reader

    files = sorted(out_dir.glob("*.wrtf"))
    assert len(files) == 1
    with Reader(files[0]) as r:
        assert r.rate_hz == 1000 and len(r.sessions) == 1
        s = r.sessions[0]
        f = r.frames(0)
        missing = sorted(set(range(N_FRAMES)) - set((f["tick"] - f["tick"][0]).tolist()))
        assert s.frame_count == N_FRAMES and s.dropped_ticks == 0, (
            s.frame_count,
            missing[:20],
            recorder_stats,
        )
        sim = f["sim"]
        k = (f["tick"] - f["tick"][0]).astype(np.int64)
        assert np.array_equal(k, np.arange(N_FRAMES))
        # tick k holds pose seq k//2 (pose on even ticks) and status seq (k-1)//2 (odd ticks)
        assert np.array_equal(sim["pose_seq"], k // 2)
        assert np.array_equal(sim["x"], (k // 2) * 0.25)
        assert np.array_equal(sim["v"][:, 1], -(k // 2).astype(np.float32))
        assert np.array_equal(sim["status_seq"][1:], (k[1:] - 1) // 2)
        assert np.array_equal(sim["gear"][1:], ((k[1:] - 1) // 2) % 7 - 1)
        assert bytes(sim["mode"][7]).rstrip(b"\0") == b"m3"  # tick 7 holds status seq 3


def test_publisher_script_is_this_format() -> None:
    """The publisher's hand-rolled bytes parse with our reader (so the live test tests the source)."""
    from wrtfd.zddsrec.format import StreamDecoder

    code = PUBLISHER.replace(
        "sock = socket.create_connection",
        "import io\nclass _S:\n    pass\nsock = None\nif 0: sock = socket.create_connection",
    )
    script = (
        code.split("sock = None")[0]
        + "sys.stdout.buffer.write(head + b''.join(frame(k) for k in range(n)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, "0", "6"], capture_output=True, timeout=60, check=True
    ).stdout
    dec = StreamDecoder()
    frames = dec.feed(out)
    assert dec.header is not None and [t.name for t in dec.header.topics] == ["rt/pose", "rt/status"]
    assert [(f.topic_idx, f.timestamp_delta_ns) for f in frames] == [(i % 2, i * 1_000_000) for i in range(6)]
