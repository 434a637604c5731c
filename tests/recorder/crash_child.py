"""Child program of the crash test: records a 100 Hz source live until it is killed.

Prints (flushed) ``ready``, then ``synced <frames>`` after every fsync (every frame written so
far is on disk) and ``produced <n>`` for every 10th sample handed to the recorder.
Usage: ``python crash_child.py OUTPUT_DIR``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio

from tests.recorder.conftest import session_section
from wrtfd.decoders.base import Sample
from wrtfd.recorder import LiveRecorder, Recorder, RecorderPolicy, SourceSpec

RATE = 100
DEFINITION = {
    "version": "1.0",
    "session": session_section(),
    "frame": {
        "description": "f",
        "fields": [
            {"name": "n", "type": "uint32", "description": "sample index"},
            {"name": "half", "type": "float64", "description": "n / 2 (a checkable payload)"},
            {"name": "v", "type": "float32", "dimensions": 16, "description": "payload"},
        ],
    },
}
POLICY = dict(rate_hz=RATE, fsync_interval_s=0.25, batch_s=0.05, jitter_s=0.05, bunch_s=0.03, settle_s=0.1)


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _on_batch(rec: Recorder, synced: bool) -> None:
    if synced:
        _say(f"synced {rec.sink.frames}")


async def main(out: Path) -> None:
    live = LiveRecorder(
        [SourceSpec("src", DEFINITION, use_source_clock=False)],
        RecorderPolicy(output_dir=out, **POLICY),  # type: ignore[arg-type]
        on_batch=_on_batch,
    )
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        _say("ready")
        t0 = time.monotonic()
        n = 0
        while True:
            live.sink(Sample("src", time.monotonic_ns(), {"n": n, "half": n / 2, "v": [float(n)] * 16}))
            if n % 10 == 0:
                _say(f"produced {n}")
            n += 1
            await anyio.sleep(max(0.0, t0 + n / RATE - time.monotonic()))


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]))
