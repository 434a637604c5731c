"""The live daemon: validated config, task group wiring, sd_notify, status endpoint and logging.

Only ``wrtfd run`` and ``wrtfd config`` import this package; offline tools never load pydantic or
anyio through it.
"""

from __future__ import annotations

__all__: list[str] = []
