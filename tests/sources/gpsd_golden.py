"""gpsd's golden output (``../shared/data/nmea/*.log.chk``) and the comparison of our fixes with it.

Shared by the live serial test and the NMEA log import test; what is compared, and the known
differences asserted as such, are described in ``test_serial_nmea_gpsd``'s docstring.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np

GPS_WEEK_ROLLOVER_NS = 1024 * 7 * 86400 * 1_000_000_000
#: Logs for which gpsd applied its week-rollover guard (see module docstring).
ROLLOVER_LOGS = {"neo-m8n.log"}

FIELDS = {
    "lat": "lat_deg",
    "lon": "lon_deg",
    "alt": "alt_msl_m",
    "speed": "speed_mps",
    "track": "course_deg",
    "mode": "fix_mode",
}


def _tolerance(printed: str) -> float:
    """Half a unit in the last printed digit, plus float noise."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return 0.5 * 10.0**-decimals + 1e-9


def _matches(printed: str | int, ours: object, *, float32: bool = False) -> bool:
    """gpsd's printed value (JSON number text; ints as int) vs ours; ``float32``: ours was
    stored as a float32 (a WRTF channel), so it may also be off by that format's spacing."""
    if isinstance(printed, int):
        return ours == printed
    stored = float(np.spacing(np.float32(ours))) if float32 else 0.0  # type: ignore[arg-type]
    return abs(float(printed) - float(ours)) <= _tolerance(printed) + stored  # type: ignore[arg-type]


def _iso_to_ns(text: str) -> int:
    date, _, clock = text.rstrip("Z").partition("T")
    whole, _, frac = clock.partition(".")
    base = dt.datetime.fromisoformat(f"{date}T{whole}+00:00")
    return int(base.timestamp()) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])


def gpsd_expectations(chk: Path) -> tuple[list[tuple[int, dict[str, str], bool]], set[bytes]]:
    """(every TPV with time and position as (time, tpv, is the last for its time), echoed sentences)."""
    reports: list[tuple[int, dict[str, str]]] = []
    echoed: set[bytes] = set()
    for line in chk.read_text(encoding="utf-8").splitlines():
        if line.startswith("$"):
            echoed.add(line.encode().lstrip(b"$"))
        elif line.startswith('{"class":"TPV"'):
            tpv = json.loads(line, parse_float=str)
            if "time" in tpv and "lat" in tpv:
                reports.append((_iso_to_ns(tpv["time"]), tpv))
    last_index = {t: i for i, (t, _) in enumerate(reports)}
    return [(t, tpv, last_index[t] == i) for i, (t, tpv) in enumerate(reports)], echoed


def check_against_gpsd(
    log_name: str,
    chk: Path,
    by_time: Mapping[int, Mapping[str, object]],
    float32_channels: frozenset[str] = frozenset(),
    dropped_times: frozenset[int] = frozenset(),
) -> None:
    """Our fix state at the end of each epoch (``by_time``: fix time ns -> channel values)
    against gpsd's TPV reports: values within the printed precision (plus float32's spacing
    for ``float32_channels``, read back from a file), and the same fixes; ``dropped_times``
    (gpsd's times) must be absent from ours."""
    reports, _echoed = gpsd_expectations(chk)
    assert reports, "the golden file has TPV positions"
    fixes = {t for t, v in by_time.items() if not math.isnan(v["lat_deg"])}  # type: ignore[arg-type]
    shift = GPS_WEEK_ROLLOVER_NS if log_name in ROLLOVER_LOGS else 0
    mismatches: list[tuple[object, ...]] = []
    for gpsd_time, tpv, is_final in reports:
        if gpsd_time in dropped_times:
            assert gpsd_time - shift not in by_time, tpv["time"]
            continue
        values = by_time.get(gpsd_time - shift)
        if values is None:
            mismatches.append((tpv["time"], "no fix of ours at this time"))
            continue
        for key, channel in FIELDS.items():
            if key not in tpv:
                continue
            ours = values[channel]
            if _matches(tpv[key], ours, float32=channel in float32_channels):
                continue
            # gpsd's mid-cycle model values (speed from position deltas before RMC, mode
            # before GGA/GSA): only its final report of the time must carry receiver values.
            if not is_final and key in ("speed", "mode"):
                continue
            mismatches.append((tpv["time"], key, tpv[key], ours))
    assert mismatches == []

    # Accepted fixes: gpsd's are all ours; ours may add only the last epoch of the log.
    gpsd_fixes = {t - shift for t, _, _ in reports if t not in dropped_times}
    extra = fixes - gpsd_fixes
    assert extra <= {max(fixes)}, f"fixes gpsd did not report: {sorted(extra)}"
    assert len(gpsd_fixes) == len(fixes) - len(extra)
