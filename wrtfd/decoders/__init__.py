"""Pure decoders: bytes in, values out. No I/O, no clocks, no asyncio, no WRTF knowledge."""

__all__: list[str] = []
