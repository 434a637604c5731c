"""Commands that write ``-o OUT`` never lose a recording: an existing OUT only with ``--force``,
an input never, a failure leaves what was there; bad numbers are one error line
(wrtfd/cli/output_path.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.cli.inprocess import wrtfd_main
from tests.format.samples import write_car_file, write_definition
from wrtfd.errors import WrtfdError
from wrtfd.format import Reader

REPO = Path(__file__).resolve().parents[2]
ROAD = REPO / "config" / "tracks" / "road.trk"
FORZA_DEF = REPO / "config" / "schemas" / "forza.wrtf.yaml"


def one_error_line(err: str, *words: str) -> None:
    assert err.startswith("wrtfd: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in err, err


@pytest.fixture
def rec(tmp_path: Path) -> Path:
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    return f


# -- 1. an existing output, or an input, is not overwritten ---------------------------------------


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_export_onto_its_input_is_refused_even_with_force(rec: Path, force: list[str]) -> None:
    before = rec.read_bytes()
    # the same file by another name: ./a.wrtf from its folder
    r = wrtfd_main("export", "a.wrtf", "-o", "./a.wrtf", "--format", "csv", *force, cwd=rec.parent)
    assert r.returncode == 2
    one_error_line(r.stderr, "is the input")
    assert rec.read_bytes() == before
    assert sorted(p.name for p in rec.parent.iterdir()) == ["a.wrtf"]  # no temporary left


def test_export_onto_an_existing_file_needs_force(rec: Path) -> None:
    out = rec.with_name("old.csv")
    out.write_text("keep me\n")
    r = wrtfd_main("export", str(rec), "-o", str(out))
    assert r.returncode == 2
    one_error_line(r.stderr, "exists", "--force")
    assert out.read_text() == "keep me\n"
    assert wrtfd_main("export", str(rec), "-o", str(out), "--force").returncode == 0
    assert out.read_text().startswith('"session","tick"')


def test_motec_export_refuses_an_existing_session_file(rec: Path) -> None:
    """Several sessions make OUT-s0.ld, OUT-s1.ld ...: each is checked, none written."""
    taken = rec.with_name("m-s1.ldx")
    taken.write_text("keep me\n")
    r = wrtfd_main("export", str(rec), "-o", str(rec.with_name("m.ld")))
    assert r.returncode == 2
    one_error_line(r.stderr, "m-s1.ldx exists", "--force")
    assert taken.read_text() == "keep me\n"
    assert sorted(p.name for p in rec.parent.iterdir()) == ["a.wrtf", "m-s1.ldx"]


def test_plot_onto_its_input_is_refused(rec: Path) -> None:
    before = rec.read_bytes()
    for force in ([], ["--force"]):
        r = wrtfd_main("plot", str(rec), "-o", str(rec), *force)
        assert r.returncode == 2
        one_error_line(r.stderr, "is the input")
    assert rec.read_bytes() == before


def test_compare_onto_an_input_is_refused_through_a_symlink(rec: Path) -> None:
    b = rec.with_name("b.wrtf")
    shutil.copyfile(rec, b)
    link = rec.with_name("link.wrtf")
    link.symlink_to(rec)
    before = rec.read_bytes()
    r = wrtfd_main("compare", str(b), str(rec), "-o", str(link), "--force")
    assert r.returncode == 2
    one_error_line(r.stderr, "is the input")
    assert rec.read_bytes() == before and link.is_symlink()


def test_compare_onto_an_existing_file_needs_force(rec: Path) -> None:
    out = rec.with_name("cmp.png")
    out.write_bytes(b"old")
    r = wrtfd_main("compare", str(rec), str(rec), "-o", str(out))
    assert r.returncode == 2
    one_error_line(r.stderr, "exists", "--force")
    assert out.read_bytes() == b"old"


def test_track_show_onto_a_recording_needs_force(rec: Path) -> None:
    before = rec.read_bytes()
    r = wrtfd_main("track", "show", str(ROAD), "-o", str(rec))
    assert r.returncode == 2
    one_error_line(r.stderr, "exists", "--force")
    assert rec.read_bytes() == before


def test_track_show_writes_beside_and_renames(tmp_path: Path) -> None:
    out = tmp_path / "map.png"
    out.write_bytes(b"old")
    assert wrtfd_main("track", "show", str(ROAD), "-o", str(out), "--force").returncode == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["map.png"]


def test_repair_onto_an_existing_output_needs_force(rec: Path) -> None:
    out = rec.with_name("other.wrtf")
    out.write_text("keep me\n")
    r = wrtfd_main("repair", str(rec), "-o", str(out))
    assert r.returncode == 2
    one_error_line(r.stderr, "exists", "--force")
    assert out.read_text() == "keep me\n"
    assert wrtfd_main("repair", str(rec), "-o", str(out), "--force").returncode == 0
    assert out.read_bytes() == rec.read_bytes()
    assert sorted(p.name for p in rec.parent.iterdir()) == ["a.wrtf", "other.wrtf"]


def test_repair_onto_its_input_is_refused(rec: Path) -> None:
    r = wrtfd_main("repair", "a.wrtf", "-o", str(rec), "--force", cwd=rec.parent)
    assert r.returncode == 2
    one_error_line(r.stderr, "is the input")


# -- 2. repair with another file's definition -----------------------------------------------------


def test_repair_with_a_definition_of_another_layout_is_refused(rec: Path) -> None:
    before = rec.read_bytes()
    r = wrtfd_main("repair", str(rec), "--schema", str(FORZA_DEF))
    assert r.returncode == 2
    one_error_line(r.stderr, "does not match", "without --schema")
    assert rec.read_bytes() == before
    with Reader(rec) as reader:
        assert reader.complete and reader.total_frames == 10


def test_repair_with_the_files_own_definition_still_works(rec: Path) -> None:
    definition = write_definition(rec.with_name("car.yaml"))
    assert wrtfd_main("repair", str(rec), "--schema", str(definition)).returncode == 0


def test_info_with_a_wrong_definition_does_not_send_to_repair(rec: Path) -> None:
    r = wrtfd_main("info", str(rec), "--schema", str(FORZA_DEF))
    first = r.stdout.splitlines()[0]
    if "INCOMPLETE" in first:
        assert "wrtfd repair" not in first and "without --schema" in first
    r = wrtfd_main("info", str(rec), "--schema", str(FORZA_DEF), "--json")
    assert "does not match" not in r.stdout  # the JSON names the difference as data
    assert '"definition_mismatch": "frame: ' in r.stdout


# -- 3. write -----------------------------------------------------------------------------------------


def test_a_failed_write_keeps_the_existing_output(rec: Path) -> None:
    definition = write_definition(rec.with_name("car.yaml"))
    dump = wrtfd_main("dump", str(rec)).stdout
    cut = rec.with_name("cut.jsonl")
    cut.write_text(dump[: len(dump) // 2])  # the last line torn
    keep = rec.with_name("keep.wrtf")
    shutil.copyfile(rec, keep)
    before = keep.read_bytes()
    args = ["write", "--schema", str(definition), "--rate", "25", "-o", str(keep), "--force", str(cut)]
    r = wrtfd_main(*args)
    assert r.returncode == 2
    one_error_line(r.stderr)
    assert keep.read_bytes() == before
    assert sorted(p.name for p in rec.parent.iterdir()) == ["a.wrtf", "car.yaml", "cut.jsonl", "keep.wrtf"]


def test_write_onto_its_input_is_refused(rec: Path) -> None:
    definition = write_definition(rec.with_name("car.yaml"))
    dump = rec.with_name("d.jsonl")
    dump.write_text(wrtfd_main("dump", str(rec)).stdout)
    before = dump.read_bytes()
    r = wrtfd_main(
        "write", "--schema", str(definition), "--rate", "25", "-o", str(dump), "--force", str(dump)
    )
    assert r.returncode == 2
    one_error_line(r.stderr, "is the input")
    assert dump.read_bytes() == before


def test_write_with_force_replaces_on_success(rec: Path) -> None:
    definition = write_definition(rec.with_name("car.yaml"))
    dump = rec.with_name("d.jsonl")
    dump.write_text(wrtfd_main("dump", str(rec)).stdout)
    out = rec.with_name("out.wrtf")
    out.write_text("old\n")
    args = ["write", "--schema", str(definition), "--rate", "25", "-o", str(out), str(dump)]
    assert wrtfd_main(*args).returncode == 2
    assert wrtfd_main(*args, "--force").returncode == 0
    with Reader(out) as reader:
        assert reader.total_frames == 10


# -- 4. simulate --link -------------------------------------------------------------------------------


def make_pty(link: Path) -> object:
    from wrtfd.simulate.gnss import GnssErrors
    from wrtfd.simulate.gnss_pty import GnssPty

    return GnssPty(None, GnssErrors(seed=1), utc_start_ns=0, link=link)  # type: ignore[arg-type]


def test_link_over_a_file_is_refused(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n")
    with pytest.raises(WrtfdError, match="not a symlink"):
        make_pty(notes)
    assert notes.read_text() == "precious\n"
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_link_over_a_symlink_to_a_file_is_refused(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n")
    link = tmp_path / "gps"
    link.symlink_to(notes)
    with pytest.raises(WrtfdError, match="not to a pty"):
        make_pty(link)
    assert os.readlink(link) == str(notes)


def test_a_stale_link_to_a_pty_is_replaced_and_removed_on_close(tmp_path: Path) -> None:
    link = tmp_path / "gps"
    link.symlink_to("/dev/pts/999999")  # a crashed run's
    side = tmp_path / "gps.new"
    side.write_text("not ours\n")  # the old code removed this name
    pty = make_pty(link)
    try:
        assert os.readlink(link) == pty.path  # type: ignore[attr-defined]
    finally:
        pty.close()  # type: ignore[attr-defined]
    assert not os.path.lexists(link)
    assert side.read_text() == "not ours\n"


def test_link_in_a_missing_folder_names_the_link(tmp_path: Path) -> None:
    link = tmp_path / "nonexist" / "x"
    r = wrtfd_main(
        "simulate", "--protocol", "nmea", "--track", str(ROAD), "--pty", "--wait", "1", "--link", str(link)
    )
    assert r.returncode == 2
    one_error_line(r.stderr, str(link))
    assert "/dev/pts" not in r.stderr


def test_link_over_a_file_through_the_cli(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n")
    r = wrtfd_main(
        "simulate", "--protocol", "nmea", "--track", str(ROAD), "--pty", "--wait", "1", "--link", str(notes)
    )
    assert r.returncode == 2
    one_error_line(r.stderr, "not a symlink")
    assert notes.read_text() == "precious\n"


# -- 5. a failed import leaves no folders ---------------------------------------------------------------


@pytest.mark.parametrize("target", ["nd/sub/x.wrtf", "nd/sub/"])
def test_a_failed_import_removes_the_folders_it_made(tmp_path: Path, target: str) -> None:
    from tests.importers.test_pcap_content import simulated_datagrams
    from tests.importers.test_pcap_import import write_capture

    cap = tmp_path / "rig.pcapng"
    write_capture(cap, [(7777, simulated_datagrams("pcars2", 1.0), 60.0)])
    (tmp_path / "kept").mkdir()  # a folder that was there stays
    # Project CARS datagrams read as Forza: nothing to import, found after the folders were made
    r = wrtfd_main("import", str(cap), "--protocol", "forza", "-o", str(tmp_path / "kept" / target))
    assert r.returncode == 2
    one_error_line(r.stderr, "nothing to import")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "rig.pcapng"]
    assert list((tmp_path / "kept").iterdir()) == []


# -- 6. a file name that is not UTF-8 --------------------------------------------------------------------


def test_export_to_a_name_that_is_not_utf8(rec: Path) -> None:
    out = rec.parent / os.fsdecode(b"y\xfe.csv")
    r = wrtfd_main("export", str(rec), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert out.read_text(encoding="utf-8").startswith('"session","tick"')


def test_export_into_a_folder_that_is_not_utf8_is_one_line(rec: Path) -> None:
    pytest.importorskip("pyarrow")
    folder = rec.parent / os.fsdecode(b"d\xfe")
    folder.mkdir()
    r = wrtfd_main("export", str(rec), "-o", str(folder / "y.parquet"))
    assert r.returncode == 2
    one_error_line(r.stderr, "UTF-8")
    assert list(folder.iterdir()) == []


# -- 7. image sizes --------------------------------------------------------------------------------------


@pytest.mark.parametrize("width", ["0", "-5", "99", "100000"])
@pytest.mark.parametrize("command", ["plot", "compare", "track"])
def test_image_width_out_of_range_is_one_line(rec: Path, command: str, width: str) -> None:
    out = str(rec.with_name("p.png"))
    args = {
        "plot": ["plot", str(rec)],
        "compare": ["compare", str(rec), str(rec)],
        "track": ["track", "show", str(ROAD)],
    }[command]
    r = wrtfd_main(*args, "-o", out, "--width", width)
    assert r.returncode == 2
    one_error_line(r.stderr, "--width must be 100 to 10000 pixels")
    assert not Path(out).exists()


# -- 8. negative sessions -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["dump", "laps"])
def test_negative_session_is_refused(rec: Path, command: str) -> None:
    r = wrtfd_main(command, str(rec), "--session", "-1")
    assert r.returncode == 2
    one_error_line(r.stderr, "no session -1")
    assert r.stdout == ""
