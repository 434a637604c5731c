"""Regenerate the shipped circuit library (wrtfd/circuits/*.json) from racetrackdb and road.trk.

    python tools/make_circuits.py ../shared/data/trackday/trackdb/racetrackdb__racetracks.json

Only racetrackdb's circuits with a ``finishLinePolygon`` are written. The polygon is a box round
the finish line; the line is laid through its middle across the track, whose direction (and the
driving direction) comes from the circuit's ``overlay.gpsShape`` (a lap's trace, in driving order)
or, without one, from another circuit with the same polygon; with neither, the line follows the
box's long side and its direction is ``"either"``. Hillside comes from road.trk's geo anchor.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from wrtfd.tracks import load_track
from wrtfd.tracks.circuit import Circuit, circuit_from_track, circuit_to_dict, line_across
from wrtfd.tracks.geodesy import LocalPlane

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "wrtfd" / "circuits"
NOTICE = "racetrackdb (lapshubdev/racetrackdb, MIT licence, Copyright Orcha Software LLC), id {id}"


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def polygon_key(entry: dict[str, Any]) -> tuple[tuple[float, float], ...]:
    return tuple((round(p["latitude"], 7), round(p["longitude"], 7)) for p in entry["finishLinePolygon"])


def shape_of(entry: dict[str, Any]) -> list[tuple[float, float]] | None:
    overlay = entry.get("overlay")
    shape = overlay.get("gpsShape") if isinstance(overlay, dict) else None
    if not shape or len(shape) < 3:
        return None
    return [(float(p[1]), float(p[0])) for p in shape]  # [lon, lat] -> (lat, lon)


def circuit_of(entry: dict[str, Any], shape: list[tuple[float, float]] | None) -> Circuit:
    poly = [(p["latitude"], p["longitude"]) for p in entry["finishLinePolygon"]]
    lat0 = sum(p[0] for p in poly) / len(poly)
    lon0 = sum(p[1] for p in poly) / len(poly)
    plane = LocalPlane(lat0, lon0)
    px, py = plane.to_xy(np.array([p[0] for p in poly]), np.array([p[1] for p in poly]))
    if shape is not None:
        sx, sy = plane.to_xy(np.array([p[0] for p in shape]), np.array([p[1] for p in shape]))
        i = int(np.argmin(np.hypot(sx, sy)))
        j = min(i + 1, len(sx) - 1)
        i = j - 1
        hx, hy = float(sx[j] - sx[i]), float(sy[j] - sy[i])
        n = math.hypot(hx, hy)
        across = np.abs(px * (-hy / n) + py * (hx / n))
        width = float(min(60.0, max(12.0, 2.0 * across.max())))
        return Circuit(entry["name"], line_across(plane, 0.0, 0.0, hx, hy, width), direction="right")
    # no trace: the box's long axis is the line
    cov = np.cov(np.vstack([px, py]))
    w, v = np.linalg.eigh(cov)
    ax, ay = v[:, int(np.argmax(w))]
    extent = float(np.ptp(px * ax + py * ay))
    line = line_across(plane, 0.0, 0.0, ay, -ax, min(60.0, max(12.0, extent)))  # heading across the axis
    return Circuit(entry["name"], line, direction="either")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trackdb", type=Path, help="racetrackdb__racetracks.json")
    p.add_argument("-o", "--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    entries = json.loads(args.trackdb.read_text())
    with_line = [e for e in entries if e.get("finishLinePolygon")]
    shapes = {polygon_key(e): shape_of(e) for e in with_line if shape_of(e) is not None}
    args.out.mkdir(parents=True, exist_ok=True)
    written = []
    for e in with_line:
        c = circuit_of(e, shape_of(e) or shapes.get(polygon_key(e)))
        data = circuit_to_dict(c)
        data["source"] = NOTICE.format(id=e["id"])
        path = args.out / f"{slug(e['name'])}.json"
        path.write_text(json.dumps(data, indent=2) + "\n")
        written.append(path.name)
    hill = circuit_from_track(load_track(REPO / "config" / "tracks" / "road.trk"))
    data = circuit_to_dict(Circuit("Hillside", hill.start, hill.sectors, direction=hill.direction))
    data["source"] = "config/tracks/road.trk (Hillside road course) laid on its geo anchor"
    (args.out / "hillside.json").write_text(json.dumps(data, indent=2) + "\n")
    written.append("hillside.json")
    sys.stderr.write(f"wrote {len(written)} circuits to {args.out}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
