"""A GNSS recording made offline: the simulated car of wrtfd.simulate.gnss drives road.trk laid
on the map, its receiver's NMEA (10 Hz, 1 m of wandering error) is imported through a daemon
config whose NMEA source has road.trk's circuit, as the in-car daemon would have recorded it
(the live decoder, GnssLapChannels, the circuit in the metadata). The true laps come with it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from wrtfd.cli.main import main
from wrtfd.simulate.gnss import Drive, GnssErrors, epochs, nmea_epoch, pit_lane_lines, truth_laps
from wrtfd.tracks import LanePath, load_track, timing_sectors
from wrtfd.tracks.circuit import circuit_from_track, circuit_to_dict
from wrtfd.tracks.geodesy import track_plane

ROAD = Path(__file__).resolve().parents[2] / "config" / "tracks" / "road.trk"
UTC0 = 1_780_000_000 * 1_000_000_000


def gnss_recording(
    directory: Path,
    *,
    laps: int = 3,
    seed: int = 2,
    pit_laps: tuple[int, ...] = (),
    pit_lines_m: tuple[float, float] | None = None,
) -> tuple[Path, list[dict[str, object]]]:
    """``directory/sim.wrtf`` (the recording) and the car's true laps. ``pit_laps``: the car takes
    the simulator's pit lane at the end of these laps; ``pit_lines_m``: the circuit gets pit
    lines across it this far from the line (entry, exit; negative: before it)."""
    track = load_track(ROAD)
    plane = track_plane(track.extensions)
    assert plane is not None
    path = LanePath(track, 0)
    drive = Drive(path, plane, laps=laps, seed=7, sectors_m=timing_sectors(track, path), pit_laps=pit_laps)
    fixes = epochs(drive, GnssErrors(seed=seed, noise_m=1.0), rate_hz=10, utc_start_ns=UTC0)
    (directory / "sim.nmea").write_bytes(b"".join(nmea_epoch(f) for f in fixes))
    circuit = circuit_from_track(track)
    if pit_lines_m is not None:
        entry, exit_ = pit_lane_lines(path, plane, entry_m=pit_lines_m[0], exit_m=pit_lines_m[1])
        circuit = dataclasses.replace(circuit, pit_entry=entry, pit_exit=exit_)
    (directory / "road.json").write_text(json.dumps(circuit_to_dict(circuit)))
    config = directory / "gps.toml"
    config.write_text(
        '[[sources]]\nkind = "serial"\nname = "gps"\nprotocol = "nmea"\ndevice = "/dev/null"\n'
        'circuit = "road.json"\n'
    )
    out = directory / "sim.wrtf"
    cmd = ["import", str(directory / "sim.nmea"), "--format", "nmea", "--config", str(config), "-o", str(out)]
    assert main(cmd) == 0
    return out, truth_laps(drive, UTC0)
