"""Numbers on the command line: nan, inf and values out of range are argparse's error (exit 2,
no traceback), before anything runs; they gave tracebacks, or runs that never ended."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from wrtfd.cli.arg_types import SECONDS, number
from wrtfd.cli.main import main

OVAL = ("config/tracks/oval.trk",)


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--timeout", "nan"],
        ["status", "--watch", "inf"],
        ["status", "--timeout", "0"],
        ["mark", "--timeout", "nan"],
        ["simulate", "--protocol", "nmea", "--pty", "--track", *OVAL, "--noise-m", "nan"],
        ["simulate", "--protocol", "nmea", "--pty", "--track", *OVAL, "--start-delay", "nan"],
        ["simulate", "--protocol", "nmea", "--pty", "--track", *OVAL, "--hold", "nan"],
        ["simulate", "--protocol", "nmea", "--pty", "--track", *OVAL, "--baud", "0"],
        ["simulate", "--protocol", "forza", "--track", *OVAL, "--speed-scale", "inf"],
        ["simulate", "--protocol", "forza", "--track", *OVAL, "--rate", "nan"],
        ["import", "drive.log", "-o", "drive.wrtf", "--start-timestamp", "-5"],  # was 1970 or a traceback
        ["import", "drive.log", "-o", "drive.wrtf", "--start-timestamp", "0"],
        ["import", "drive.log", "-o", "drive.wrtf", "--start-timestamp", "99999999999999999999"],
    ],
)
def test_a_number_out_of_range_stops_before_anything_runs(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argv[-2]}" in err and "Traceback" not in err


def test_the_number_type() -> None:
    within = number(0.0, 10.0)
    assert within("0") == 0.0 and within("10") == 10.0 and within("2.5") == 2.5
    for text in ("nan", "inf", "-inf", "-0.1", "10.1", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            within(text)
    with pytest.raises(argparse.ArgumentTypeError, match="not more than 0 to 86400"):
        SECONDS("0")
    assert SECONDS("1e-3") == 0.001 and SECONDS("86400") == 86400.0


def test_a_url_with_an_unclosed_bracket_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--url", "http://[::1"]) == 2  # ValueError: Invalid IPv6 URL
    assert capsys.readouterr().err == "wrtfd: error: http://[::1: expected an http://HOST[:PORT] URL\n"


def test_simulate_truth_into_a_missing_directory_stops_before_the_drive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = tmp_path / "missing" / "t.json"
    argv = ["simulate", "--protocol", "nmea", "--pty", "--track", *OVAL, "--truth", str(truth)]
    assert main(argv) == 2  # it failed only after the drive, losing the run's truth
    assert capsys.readouterr().err == f"wrtfd: error: --truth {truth}: no directory {truth.parent}\n"
