"""Writer and reader behaviour: sessions, ticks, time (N9), gaps (N10), footer orders (N2),
external definitions (N5), durability on failed writes."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.format.conftest import START_US, fld, make_schema
from wrtfd.errors import FormatError
from wrtfd.format import Reader, Schema, Writer


def _write_two_sessions(path: Path, schema: Schema) -> None:
    with Writer(path, schema, rate_hz=50, start_timestamp_us=START_US, metadata={"Track": "Spa"}) as w:
        w.begin_session({"start_timestamp": START_US + 5_000_000, "track": "Spa-Francorchamps"})
        for t in (0, 1, 2, 5, 6):
            w.write_frame(
                t,
                {
                    "speed": t * 1.5,
                    "gear": t % 3,
                    "state": "racing",
                    "wheels": [{"temperature": 80.0 + i, "pressure": 1.9} for i in range(4)],
                },
            )
        w.end_session({"laps": 3, "best_lap_s": 137.25})
        w.begin_session({"track": "Monza"})
        arr = np.zeros(4, dtype=schema.frame_dtype)
        arr["tick"] = [3, 4, 10, 11]
        arr["state"] = 5
        arr["on_track"] = True
        w.write_frames(arr)


def test_write_read_sessions(car_schema: Schema, tmp_file: Callable[..., Path]) -> None:
    path = tmp_file()
    _write_two_sessions(path, car_schema)
    with Reader(path) as r:
        assert r.complete and r.rate_hz == 50 and r.start_timestamp_us == START_US
        assert r.metadata["Track"] == "Spa"
        s0, s1 = r.sessions
        assert (s0.frame_count, s0.first_tick, s0.last_tick, s0.dropped_ticks) == (5, 0, 6, 2)  # N10
        assert (s1.frame_count, s1.first_tick, s1.last_tick, s1.dropped_ticks) == (4, 3, 11, 5)
        assert s0.footer_order == "spec" and s0.footer is not None
        assert int(s0.footer["laps"]) == 3 and float(s0.footer["best_lap_s"]) == 137.25
        assert bytes(s0.header["track"]).rstrip(b"\0") == b"Spa-Francorchamps"
        f0 = r.frames(0)
        assert list(f0["tick"]) == [0, 1, 2, 5, 6]
        assert f0["speed"][3] == np.float32(7.5)
        assert list(f0["wheels"]["temperature"][2]) == [80.0, 81.0, 82.0, 83.0]
        assert list(f0["state"]) == [1] * 5
        assert list(r.frames(1)["state"]) == [5] * 4 and bool(r.frames(1)["on_track"].all())
        # N9: session 0 has its own start_timestamp; session 1 left it 0 -> file start timestamp.
        assert s0.time_base_us == START_US + 5_000_000 and s1.time_base_us == START_US
        assert list(r.frame_times_us(0)) == [START_US + 5_000_000 + t * 20_000 for t in (0, 1, 2, 5, 6)]
        assert list(r.frame_times_us(1)) == [START_US + t * 20_000 for t in (3, 4, 10, 11)]


def test_n9_time_rounds_for_non_integer_periods(tmp_file: Callable[..., Path]) -> None:
    schema = make_schema([fld("x", "uint8")])
    path = tmp_file()
    with Writer(path, schema, rate_hz=60, start_timestamp_us=1000) as w:
        w.begin_session()
        for t in (0, 1, 2, 3):
            w.write_frame(t)
    with Reader(path) as r:
        assert list(r.frame_times_us(0)) == [1000, 1000 + 16667, 1000 + 33333, 1000 + 50000]


@pytest.mark.parametrize("ticks", [[0, 0], [5, 4], [3, 3, 4]])
def test_ticks_must_strictly_increase(
    ticks: list[int], car_schema: Schema, tmp_file: Callable[..., Path]
) -> None:
    """N10: strictly increasing ticks per session, both on the slow and the batch path."""
    with Writer(tmp_file("a.wrtf"), car_schema, rate_hz=10, start_timestamp_us=START_US) as w:
        w.begin_session()
        with pytest.raises(FormatError, match="strictly increase"):
            for t in ticks:
                w.write_frame(t)
    with Writer(tmp_file("b.wrtf"), car_schema, rate_hz=10, start_timestamp_us=START_US) as w:
        w.begin_session()
        arr = np.zeros(len(ticks), dtype=car_schema.frame_dtype)
        arr["tick"] = ticks
        with pytest.raises(FormatError, match="strictly increase"):
            w.write_frames(arr)
        assert w.frames_in_session == 0


def test_the_batch_tick_check_names_the_first_bad_tick_whatever_came_before(
    car_schema: Schema, tmp_file: Callable[..., Path]
) -> None:
    """write_frames compares ticks into a buffer kept between batches: a smaller batch after a
    larger one must not see the larger one's comparisons (only its own), wherever its fault is."""
    with Writer(tmp_file("a.wrtf"), car_schema, rate_hz=10, start_timestamp_us=START_US) as w:
        w.begin_session()
        tick = 0
        steps = ((500, None, False), (40, 39, True), (40, 1, False), (3, 2, False), (700, None, False))
        for n, bad, same in steps:
            arr = np.zeros(n, dtype=car_schema.frame_dtype)
            arr["tick"] = np.arange(tick, tick + n)
            if bad is not None:
                arr["tick"][bad] = arr["tick"][bad - 1] if same else arr["tick"][bad - 1] - 1
                written = w.frames_in_session
                with pytest.raises(FormatError, match=f"index {bad} after"):
                    w.write_frames(arr)
                assert w.frames_in_session == written
                continue
            w.write_frames(arr)
            tick += n
        assert w.frames_in_session == 1200 and w.last_tick == 1199


def test_ticks_restart_per_session(car_schema: Schema, tmp_file: Callable[..., Path]) -> None:
    with Writer(tmp_file(), car_schema, rate_hz=10, start_timestamp_us=START_US) as w:
        w.begin_session()
        w.write_frame(7)
        w.begin_session()  # ends the first one
        w.write_frame(0)
        assert w.session_count == 2 and w.last_tick == 0


def test_refuses_to_overwrite(car_schema: Schema, tmp_file: Callable[..., Path]) -> None:
    path = tmp_file()
    path.write_bytes(b"precious")
    with pytest.raises(FileExistsError):
        Writer(path, car_schema, rate_hz=10)
    assert path.read_bytes() == b"precious"
    Writer(path, car_schema, rate_hz=10, exist_ok=True).close()
    assert path.read_bytes()[:8] == b"WRTF0001"


def test_close_is_idempotent_and_closed_writer_refuses(
    car_schema: Schema, tmp_file: Callable[..., Path]
) -> None:
    w = Writer(tmp_file(), car_schema, rate_hz=10, start_timestamp_us=START_US)
    w.begin_session()
    w.close()
    size = w.bytes_written
    w.close()
    assert w.bytes_written == size
    with pytest.raises(FormatError, match="closed"):
        w.write_frame(1)


def test_bad_values_name_the_field(car_schema: Schema, tmp_file: Callable[..., Path]) -> None:
    with Writer(tmp_file(), car_schema, rate_hz=10, start_timestamp_us=START_US) as w:
        w.begin_session()
        with pytest.raises(FormatError, match=r"frame\.wheels: expected 4 items, got 2"):
            w.write_frame(0, {"wheels": [{}, {}]})
        with pytest.raises(FormatError, match=r"frame\.nope: no such field"):
            w.write_frame(0, {"nope": 1})
        with pytest.raises(FormatError, match="'flying' is not a value of enum state"):
            w.write_frame(0, {"state": "flying"})
        with Writer(tmp_file("x.wrtf"), make_schema([fld("a", "uint8")]), rate_hz=1) as w2:
            w2.begin_session()
            with pytest.raises(FormatError, match="session footer given"):
                w2.end_session({"a": 1})
        w.write_frame(0, {"gear": -3})
        assert w.frames_in_session == 1


def test_long_text_is_cut_at_a_character_boundary(car_schema: Schema, tmp_file: Callable[..., Path]) -> None:
    path = tmp_file()
    with Writer(path, car_schema, rate_hz=10, start_timestamp_us=START_US) as w:
        w.begin_session({"track": "Suzuka 鈴鹿サーキット"})  # 7 + 21 bytes > 24
    with Reader(path) as r:
        raw = bytes(r.sessions[0].header["track"])
    assert raw == "Suzuka 鈴鹿サーキ".encode() + b"\0" * 2


def test_write_frames_rejects_other_dtype(car_schema: Schema, tmp_file: Callable[..., Path]) -> None:
    with Writer(tmp_file(), car_schema, rate_hz=10, start_timestamp_us=START_US) as w:
        w.begin_session()
        with pytest.raises(FormatError, match="frame dtype"):
            w.write_frames(np.zeros(3, dtype=[("tick", "<u8"), ("speed", "<f4")]))


def _swap_footer_order(path: Path) -> None:
    """Rewrite every session footer the way the .NET reference writes it (last tick, then count)."""
    data = bytearray(path.read_bytes())
    pos = data.find(b"WRSF0001")
    while pos >= 0:
        a, b = struct.unpack_from("<QQ", data, pos + 8)
        struct.pack_into("<QQ", data, pos + 8, b, a)
        pos = data.find(b"WRSF0001", pos + 8)
    path.write_bytes(bytes(data))


def test_n2_reference_footer_order_is_read(car_schema: Schema, tmp_file: Callable[..., Path]) -> None:
    """N2: a file with last tick before frame count reads correctly and says so."""
    path = tmp_file()
    _write_two_sessions(path, car_schema)
    _swap_footer_order(path)
    with Reader(path) as r:
        assert r.complete
        assert [s.footer_order for s in r.sessions] == ["reference", "reference"]
        assert [(s.footer_frame_count, s.footer_last_tick) for s in r.sessions] == [(5, 6), (4, 11)]
        assert [s.frame_count for s in r.sessions] == [5, 4]
        assert list(r.frames(1)["tick"]) == [3, 4, 10, 11]


def test_n5_external_definition_for_files_without_schema(
    car_schema: Schema, tmp_file: Callable[..., Path]
) -> None:
    path = tmp_file()
    with Writer(path, car_schema, rate_hz=10, start_timestamp_us=START_US, embed_schema=False) as w:
        w.begin_session()
        w.write_frame(4, {"speed": 2.0})
    with pytest.raises(FormatError, match=r"no 'wrtf\.schema' metadata"):
        Reader(path)
    with Reader(path, schema=car_schema) as r:
        assert r.schema_source == "external"
        assert float(r.frames(0)["speed"][0]) == 2.0


def test_n11_crashed_file_reads_by_scanning(car_schema: Schema, tmp_file: Callable[..., Path]) -> None:
    """N11: no document footer -> scan; a torn last frame is dropped and reported."""
    path = tmp_file()
    w = Writer(path, car_schema, rate_hz=10, start_timestamp_us=START_US)
    w.begin_session()
    w.write_frame(0)
    w.end_session()
    w.begin_session()
    for t in range(5):
        w.write_frame(t, {"speed": float(t)})
    w.abort()
    with open(path, "ab") as f:
        f.write(b"\x07" * (car_schema.frame_size // 2))  # half a frame: the crash tore it
    with Reader(path) as r:
        assert not r.complete and r.footer_error is not None
        assert [s.frame_count for s in r.sessions] == [1, 5]
        assert r.sessions[0].footer_offset is not None and r.sessions[1].footer_offset is None
        assert r.sessions[1].torn_bytes == car_schema.frame_size // 2
        assert list(r.frames(1)["speed"]) == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_failed_write_truncates_to_last_complete_record(
    car_schema: Schema, tmp_file: Callable[..., Path], file_size_limit: Callable[[int], None]
) -> None:
    """A write that fails leaves the file ending at a record boundary; nothing written becomes
    unreadable, and the writer's state matches the disk."""
    path = tmp_file()
    w = Writer(path, car_schema, rate_hz=10, start_timestamp_us=START_US, buffer_bytes=0)
    w.begin_session()
    for t in range(10):
        w.write_frame(t)
    good_size = path.stat().st_size
    assert good_size == w.bytes_written
    w2 = Writer(
        tmp_file("big.wrtf"), car_schema, rate_hz=10, start_timestamp_us=START_US, buffer_bytes=1 << 20
    )
    w2.close()
    file_size_limit(good_size + car_schema.frame_size * 3 + 5)
    w._buffer_limit = 1 << 20  # batch several frames into one write that will only partly fit
    for t in range(10, 20):
        w.write_frame(t)
    with pytest.raises(OSError):
        w.flush()
    file_size_limit(1 << 40)
    assert path.stat().st_size == good_size
    assert w.frames_in_session == 10 and w.last_tick == 9
    w.write_frame(10)
    w.close()
    with Reader(path) as r:
        assert r.complete
        assert list(r.frames(0)["tick"]) == list(range(11))


def test_file_is_readable_while_being_written(car_schema: Schema, tmp_file: Callable[..., Path]) -> None:
    """N11: the header goes out at once and every flush leaves a scan-readable prefix."""
    path = tmp_file()
    with Writer(path, car_schema, rate_hz=10, start_timestamp_us=START_US) as w:
        with Reader(path) as r:
            assert not r.complete and r.sessions == []
        w.begin_session({"track": "Imola"})
        for t in range(3):
            w.write_frame(t, {"speed": float(t)})
        with Reader(path) as r:  # nothing flushed yet: still just the header
            assert r.sessions == []
        w.fsync()
        with Reader(path) as r:
            assert not r.complete and r.sessions[0].frame_count == 3
            assert r.sessions[0].footer_offset is None
    with Reader(path) as r:
        assert r.complete and r.sessions[0].frame_count == 3


def test_public_api_matches_contract() -> None:
    """The names other packages code against (COMMON.md) exist and are exported."""
    import wrtfd.format as fmt

    for name in ("Schema", "Writer", "Reader", "SessionInfo", "validate_file", "repair_file"):
        assert name in fmt.__all__ and hasattr(fmt, name)
    assert all(hasattr(fmt, n) for n in fmt.__all__)
    fields = set(fmt.SessionInfo.__dataclass_fields__)
    assert {
        "offset",
        "footer_offset",
        "frame_count",
        "first_tick",
        "last_tick",
        "dropped_ticks",
        "footer_order",
        "header",
        "footer",
        "time_base_us",
    } <= fields


def test_padding_is_zeroed_whatever_the_caller_passes(tmp_file: Callable[..., Path]) -> None:
    """Spec 8.7: padding bytes are 0 even when the caller's records carry garbage there."""
    from wrtfd.format import validate_file

    schema = make_schema([fld("a", "uint8"), fld("b", "float64")])  # a@8, 7 padding bytes, b@16
    garbage = np.frombuffer(bytes(range(1, 25)) * 4, dtype=schema.frame_dtype).copy()
    garbage["tick"] = [1, 2, 3, 4]
    path = tmp_file()
    with Writer(path, schema, rate_hz=10, start_timestamp_us=START_US) as w:
        w.begin_session()
        w.write_frames(garbage[:2])
        w.write_frame(3, garbage[2])
        w.write_frame(4, garbage[3])
    assert validate_file(path) == []
    with Reader(path) as r:
        raw = r.frames(0).view(np.uint8).reshape(4, 24)
        assert not raw[:, 9:16].any()
        assert list(raw[:, 8]) == [9] * 4
        assert np.array_equal(r.frames(0)["b"], garbage["b"])


@pytest.mark.parametrize("pairs", [1, 6])  # 2 padding runs (checked by slices), 7 (by one gather)
def test_every_padding_run_is_zeroed_and_the_callers_batch_is_untouched(
    tmp_file: Callable[..., Path], pairs: int
) -> None:
    """Spec 8.7, inner and trailing padding runs (N6): zeroed in the file, not in the caller's array."""
    fields = [f for i in range(pairs) for f in (fld(f"a{i}", "uint8"), fld(f"b{i}", "float64"))]
    schema = make_schema([*fields, fld("c", "uint16")])
    size = schema.frame_size
    assert size == 8 + 16 * pairs + 8  # per pair: a 1 B, pad 7 B, b 8 B; then c 2 B, pad 6 B
    pad = np.ones(size, dtype=bool)
    pad[:8] = False
    for i in range(pairs):
        pad[8 + 16 * i] = pad[16 + 16 * i : 24 + 16 * i] = False
    pad[size - 8 : size - 6] = False
    garbage = np.frombuffer(bytes(np.arange(3 * size, dtype=np.uint8) | 1), dtype=schema.frame_dtype).copy()
    garbage["tick"] = [5, 6, 9]
    before = garbage.tobytes()
    path = tmp_file()
    with Writer(path, schema, rate_hz=10, start_timestamp_us=START_US) as w:
        w.begin_session()
        w.write_frames(garbage)
    assert garbage.tobytes() == before
    with Reader(path) as r:
        raw = r.frames(0).view(np.uint8).reshape(3, size)
        assert not raw[:, pad].any()
        assert np.array_equal(raw[:, ~pad][:, 8:], garbage.view(np.uint8).reshape(3, size)[:, ~pad][:, 8:])
        assert list(r.frames(0)["tick"]) == [5, 6, 9]
