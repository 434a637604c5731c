"""Errors keep their cause, and a missing optional library is told apart from a bad file."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

import wrtfd.errors
from tests.format.samples import write_car_file
from wrtfd.errors import FormatError, MissingDependencyError, SchemaError, WrtfdError
from wrtfd.format import Reader, Schema
from wrtfd.format.export import export_file


def test_every_error_class_derives_from_wrtfd_error() -> None:
    classes = [
        obj for obj in vars(wrtfd.errors).values() if inspect.isclass(obj) and issubclass(obj, Exception)
    ]
    assert MissingDependencyError in classes
    assert all(issubclass(cls, WrtfdError) for cls in classes)


def test_missing_pyarrow_is_not_a_format_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_car_file(tmp_path / "run.wrtf")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with Reader(tmp_path / "run.wrtf") as r, pytest.raises(MissingDependencyError) as info:
        export_file(r, tmp_path / "out.parquet")
    assert not isinstance(info.value, FormatError)
    assert info.value.extra == "parquet"
    assert str(info.value) == "Parquet export needs pyarrow: install wrtfd[parquet]"


def test_a_closed_reader_is_a_format_error(tmp_path: Path) -> None:
    write_car_file(tmp_path / "run.wrtf")
    r = Reader(tmp_path / "run.wrtf")
    r.close()
    with pytest.raises(FormatError, match="reader is closed") as info:
        r.frames(0)
    assert not isinstance(info.value, MissingDependencyError)


def test_a_rewrapped_error_keeps_its_cause() -> None:
    with pytest.raises(SchemaError, match="not valid YAML") as info:
        Schema.from_yaml("frame: [unclosed", source="t.yaml")
    assert info.value.__cause__ is not None
