"""Default values of the tunables that more than one layer (or the docs) quote.

Stdlib only, no imports from the package: the pure layers (scheduler, decoders), the I/O layers
(sources, recorder) and the daemon's config models all read their defaults from here, so a
default lives in one place. ``tests/test_docs_defaults.py`` checks that the numbers the docs
state (``docs/*.md``, README) equal these.
"""

from __future__ import annotations

__all__ = ["UDP_READ_INTERVAL_S"]

#: Batched reads: how often a steady UDP feed's socket is read (seconds; 0: on arrival). CPU
#: against the crash bound: each 0.1 s less costs about a third more CPU (docs/timing.md).
UDP_READ_INTERVAL_S = 0.2
