"""wrtfd: record live racing telemetry into WRTF files.

The stable library API is the format package (``wrtfd.format``): anyone can read, validate or
write a WRTF file with it, without the daemon.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
