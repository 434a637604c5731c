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

from wrtfd.decoders.base import Sample
from wrtfd.simulate.car import Simulation
from wrtfd.simulate.packets import Encoder
from wrtfd.simulate.sender import with_last

__all__ = ["record_simulation", "simulated_samples"]

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
        [SourceSpec(protocol, decoder.definition)],
        policy,
        start_timestamp_us=start_timestamp_us,
        metadata=metadata or {},
        derived=derived or [],
    )
