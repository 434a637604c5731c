"""The WRTF 1.0 format library: definitions, writer, reader, validator, repair.

No asyncio and no daemon knowledge: anyone can read, check or write a WRTF file with it::

    from wrtfd.format import Reader
    with Reader("run.wrtf") as r:
        speed = r.frames(0)["speed"]

How this package reads the spec's open points is in ``docs/wrtf-notes.md`` (N1-N12).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wrtfd._lazy import lazy_attributes
from wrtfd.errors import CorruptFileError as CorruptFileError
from wrtfd.errors import FormatError as FormatError
from wrtfd.errors import SchemaError as SchemaError

if TYPE_CHECKING:
    from wrtfd.format.reader import Reader as Reader
    from wrtfd.format.reader import SessionInfo as SessionInfo
    from wrtfd.format.repair import RepairReport as RepairReport
    from wrtfd.format.repair import repair_file as repair_file
    from wrtfd.format.schema import EnumDef as EnumDef
    from wrtfd.format.schema import FieldDef as FieldDef
    from wrtfd.format.schema import Leaf as Leaf
    from wrtfd.format.schema import Schema as Schema
    from wrtfd.format.schema import StructDef as StructDef
    from wrtfd.format.validate import Finding as Finding
    from wrtfd.format.validate import validate_file as validate_file
    from wrtfd.format.writer import Writer as Writer

#: Name -> the module defining it, imported when the name is first used: ``wrtfd info`` reads a
#: file without loading the writer, the validator or the repair tool.
_LAZY = {
    "Reader": "reader",
    "SessionInfo": "reader",
    "RepairReport": "repair",
    "repair_file": "repair",
    "EnumDef": "schema",
    "FieldDef": "schema",
    "Leaf": "schema",
    "Schema": "schema",
    "StructDef": "schema",
    "Finding": "validate",
    "validate_file": "validate",
    "Writer": "writer",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "CorruptFileError",
    "EnumDef",
    "FieldDef",
    "Finding",
    "FormatError",
    "Leaf",
    "Reader",
    "RepairReport",
    "Schema",
    "SchemaError",
    "SessionInfo",
    "StructDef",
    "Writer",
    "repair_file",
    "validate_file",
]
