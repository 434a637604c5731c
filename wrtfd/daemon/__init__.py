"""The live daemon: validated config, task group wiring, sd_notify, status endpoint and logging.

Only ``wrtfd run`` and ``wrtfd config`` import this package; offline tools never load pydantic or
anyio through it.
"""

from __future__ import annotations

from wrtfd._optional import require_all

__all__: list[str] = []

# The core install (`pip install wrtfd`) has no daemon: say so in one line, naming the extra,
# before any module of this package fails on its first `import anyio`.
require_all(("anyio", "pydantic"), extra="daemon", purpose="the recording daemon (wrtfd run, wrtfd config)")
