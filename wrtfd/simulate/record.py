"""Record a simulated session straight into WRTF files, without a network or a daemon.

The simulated packets go through the protocol's real decoder and the recorder's replay path
(the same code as ``wrtfd import``), so the file is what ``wrtfd run`` would have written for
that feed; the receive times are the simulated times. Used by ``wrtfd simulate --record DIR``
for demos and by tests of ``wrtfd laps`` / ``wrtfd plot``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wrtfd.decoders.base import Sample, awaited_info
from wrtfd.simulate.car import Simulation
from wrtfd.simulate.encoding import Encoder
from wrtfd.simulate.sender import with_last

__all__ = ["record_simulation", "simulated_samples", "tile_recording"]

#: Receive times start here (any monotonic origin works; replay only uses differences).
_RX_ORIGIN_NS = 1_000_000_000_000


def simulated_samples(sim: Simulation, encoder: Encoder, decoder: Any, source: str) -> Iterator[Sample]:
    """Decoded samples of every simulated packet, stamped with the simulated time."""
    for i, (state, last) in enumerate(with_last(sim.states())):
        rx_ns = _RX_ORIGIN_NS + round(state.t_s * 1e9)
        for datagram in encoder.encode(state, first=i == 0, last=last):
            decoded = decoder.decode(datagram)
            if decoded is not None:
                yield Sample.from_decoded(source, rx_ns, decoded)


def record_simulation(
    sim: Simulation,
    encoder: Encoder,
    output_dir: Path,
    *,
    protocol: str,
    derived: list[Any] | None = None,
    start_timestamp_us: int = 1_767_225_600_000_000,  # 2026-01-01T00:00:00Z
    metadata: dict[str, str] | None = None,
) -> list[Path]:
    """Decode and record ``sim`` as the source ``protocol``; returns the files written.

    :raises ConfigError: unknown protocol (from the decoder registry).
    """
    from wrtfd.decoders.registry import make_decoder
    from wrtfd.recorder import RecorderPolicy, SourceSpec, replay

    decoder = make_decoder(protocol)
    output_dir.mkdir(parents=True, exist_ok=True)
    policy = RecorderPolicy(output_dir=output_dir, rate_hz=round(sim.rate_hz))
    return replay(
        simulated_samples(sim, encoder, decoder, protocol),
        [SourceSpec(protocol, decoder.definition, awaits_info=awaited_info(decoder))],
        policy,
        start_timestamp_us=start_timestamp_us,
        metadata=metadata or {},
        derived=derived or [],
    )


def tile_recording(src: Path, dst: Path, *, frames: int) -> Path:
    """A recording of ``frames`` frames made by repeating the longest session of ``src``
    (ticks continue, so the drive loops without gaps); same definition, rate and metadata.

    For benchmarks and demos of long recordings: simulating an hour through the decoders takes
    minutes, repeating a few laps takes a moment.

    :raises FormatError: ``src`` has no frames.
    """
    import numpy as np

    from wrtfd.errors import FormatError
    from wrtfd.format import Reader, Writer
    from wrtfd.format.writer import copied_metadata

    with Reader(src) as r:
        if not r.sessions or r.total_frames == 0:
            raise FormatError(f"{src}: no frames to repeat")
        best = max(r.sessions, key=lambda s: s.frame_count)
        lap = np.array(r.frames(best.index))
        # The frame check (a new salt: another file) when the source has one.
        meta = copied_metadata(r.metadata)
        with Writer(
            dst,
            r.schema,
            rate_hz=r.rate_hz,
            start_timestamp_us=r.start_timestamp_us,
            metadata=meta,
            check=r.check is not None,
        ) as w:
            w.begin_session(best.header)
            span = int(lap["tick"][-1]) - int(lap["tick"][0]) + 1
            done = k = 0
            while done < frames:
                batch = lap[: frames - done].copy()
                batch["tick"] = batch["tick"] - lap["tick"][0] + k * span
                w.write_frames(batch)
                done += len(batch)
                k += 1
            w.end_session()
    return dst
