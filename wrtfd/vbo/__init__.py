"""Racelogic VBO text files: reading (:mod:`wrtfd.vbo.reader`) and writing
(:mod:`wrtfd.vbo.writer`); :mod:`wrtfd.importers.vbo` and :mod:`wrtfd.exporters.vbo` use them."""

from __future__ import annotations

from wrtfd.vbo.reader import VboChannel as VboChannel
from wrtfd.vbo.reader import VboFile as VboFile
from wrtfd.vbo.reader import VboGate as VboGate
from wrtfd.vbo.reader import looks_like_vbo as looks_like_vbo
from wrtfd.vbo.reader import read_vbo as read_vbo
from wrtfd.vbo.writer import write_vbo as write_vbo

__all__ = ["VboChannel", "VboFile", "VboGate", "looks_like_vbo", "read_vbo", "write_vbo"]
