"""The u-blox source's keys (``[sources.ubx]``) through ``wrtfd config check`` and the wiring."""

from __future__ import annotations

from pathlib import Path

import pytest

from wrtfd.cli.main import main
from wrtfd.daemon.config import load_config
from wrtfd.daemon.wiring import build_source
from wrtfd.sources.ubx import UbxSource

UBX = '[[sources]]\nkind = "serial"\nname = "gps"\nprotocol = "ubx"\ndevice = "/dev/ttyACM0"\n'


def _check(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Path]:
    path = tmp_path / "c.toml"
    path.write_text(text)
    code = main(["config", "check", str(path)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err, path


def test_ubx_keys_reach_the_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        UBX
        + 'baudrate = 38400\n[sources.ubx]\nrate_hz = 25\nbaud = 460800\nnmea_off = true\nport = "uart1"\n'
    )
    code, out, path = _check(tmp_path, text, capsys)
    assert code == 0, out
    assert "gps (serial/ubx)" in out
    loaded = load_config(path)
    built = build_source(loaded, 0, loaded.config.sources[0])
    source = built.source
    assert isinstance(source, UbxSource)
    assert (source.rate_hz, source.baud, source.nmea_off, source.port) == (25, 460800, True, "uart1")
    assert (source.dynamic_model, source.settings.baudrate) == ("automotive", 38400)


def test_ubx_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.toml"
    path.write_text(UBX)
    loaded = load_config(path)
    source = build_source(loaded, 0, loaded.config.sources[0]).source
    assert isinstance(source, UbxSource)
    assert (source.rate_hz, source.baud, source.nmea_off, source.port, source.configure) == (
        10,
        None,
        False,
        "auto",
        True,
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("rate_hz = 30", "sources[0].ubx.rate_hz: expected less than or equal to 25"),
        ("rate_hz = 0", "sources[0].ubx.rate_hz: expected greater than or equal to 1"),
        ("baud = 100000", "sources[0].ubx.baud: expected one of"),
        ('dynamic_model = "rocket"', "sources[0].ubx.dynamic_model: expected one of"),
        ("nmea_off = 1", "sources[0].ubx.nmea_off: expected true or false, got 1"),
        ("rate = 10", "sources[0].ubx.rate: unknown key"),
        ("ack_timeout_s = 0", "sources[0].ubx.ack_timeout_s: expected greater than 0"),
    ],
)
def test_bad_ubx_values_name_their_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, message: str
) -> None:
    code, out, path = _check(tmp_path, UBX + f"[sources.ubx]\n{table}\n", capsys)
    assert code == 2
    assert f"{path}: {message}" in out


def test_ubx_table_only_for_ubx(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = UBX.replace('"ubx"', '"nmea"') + "[sources.ubx]\nrate_hz = 10\n"
    code, out, path = _check(tmp_path, text, capsys)
    assert code == 2
    assert f"{path}: sources[0]: the `ubx` table is for protocol = \"ubx\", not 'nmea'" in out
