"""iRacing ``.ibt`` telemetry files (reading only; :mod:`wrtfd.importers.ibt` imports them)."""

from __future__ import annotations

from wrtfd.ibt.reader import IbtFile as IbtFile
from wrtfd.ibt.reader import IbtHeader as IbtHeader
from wrtfd.ibt.reader import IbtVar as IbtVar
from wrtfd.ibt.reader import looks_like_ibt as looks_like_ibt

__all__ = ["IbtFile", "IbtHeader", "IbtVar", "looks_like_ibt"]
