"""Sources own the I/O (UDP, serial, TCP) and hand :class:`~wrtfd.decoders.base.Sample` s on."""

__all__: list[str] = []
