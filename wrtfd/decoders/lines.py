"""Bytes at a time -> samples: what a serial line source does with each chunk it reads.

A serial source gets bytes in arbitrary chunks; :class:`LineFeed` frames them into lines
(:class:`~wrtfd.decoders.framing.LineFramer`, bounded), decodes each line and stamps every
sample with the chunk's receive time. It is pure (no device, no clock: the caller passes
``rx_ns``), so the live source (:class:`wrtfd.sources.serial.SerialLineSource`) and a replay of
the raw tap's serial bytes (``wrtfd import tap.pcapng --config``) run the same code on the same
chunks and get the same samples.

Drop reasons (added to ``drops``): the framer's (``line_too_long``), the decoder's
:class:`~wrtfd.errors.DecodeError` reasons, and ``queue_full`` when the sink raises
:class:`~wrtfd.decoders.base.SinkFull`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wrtfd.decoders.base import Decoded, Decoder, DropCounter, Sample, SampleSink, SinkFull
from wrtfd.decoders.framing import LineFramer
from wrtfd.errors import DecodeError

__all__ = ["LineFeed"]


class LineFeed:
    """Frames and decodes the byte chunks of one line source named ``name``.

    A decoder with ``decode_line(line) -> (values, source_time_ns) | None`` (SLCAN: 8,000 frames
    a second) is called through it, without a :class:`~wrtfd.decoders.base.Decoded` per line;
    the samples are the same.
    """

    __slots__ = ("_decode", "_make", "decoder", "delimiters", "drops", "framer", "max_line_bytes", "name")

    def __init__(
        self,
        name: str,
        decoder: Decoder,
        *,
        delimiters: bytes = b"\r\n",
        max_line_bytes: int = 256,
        drops: DropCounter | None = None,
    ) -> None:
        self.name = name
        self.decoder = decoder
        self.delimiters = delimiters
        self.max_line_bytes = max_line_bytes
        self.drops = drops if drops is not None else DropCounter()
        self.framer = LineFramer(delimiters=delimiters, max_line_bytes=max_line_bytes, drops=self.drops)
        decode_line = getattr(decoder, "decode_line", None)
        self._decode: Callable[[bytes], Any] = decode_line if decode_line is not None else decoder.decode
        self._make: Callable[[str, int, Any], Sample] = (
            _from_values if decode_line is not None else _from_decoded
        )

    def reset(self) -> None:
        """Forget the partial line and the decoder's stream state (a new device handle)."""
        self.framer.reset()
        reset = getattr(self.decoder, "reset", None)
        if reset is not None:
            reset()

    def feed(self, rx_ns: int, data: bytes, sink: SampleSink) -> tuple[int, int]:
        """Hand ``sink`` a sample per decoded line that ``data`` completes; returns
        ``(lines, samples)``: complete lines seen and samples the sink took."""
        lines = self.framer.feed(data)
        if not lines:
            return 0, 0
        decode = self._decode
        make = self._make
        dropped = self.drops
        name = self.name
        samples = 0
        for line in lines:
            try:
                decoded = decode(line)
            except DecodeError as exc:
                dropped.add(exc.reason)
                continue
            if decoded is None:
                continue
            try:
                sink(make(name, rx_ns, decoded))
            except SinkFull:
                dropped.add("queue_full")
                continue
            samples += 1
        return len(lines), samples


def _from_decoded(name: str, rx_ns: int, decoded: Decoded) -> Sample:
    return Sample(
        name, rx_ns, decoded.values, decoded.source_time_ns, decoded.new_session, decoded.session_info
    )


def _from_values(name: str, rx_ns: int, result: tuple[Any, int | None]) -> Sample:
    return Sample(name, rx_ns, result[0], result[1])
