"""From config to live objects: mapping, decoder options, example configs, the supervisor, rates."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest

from wrtfd.daemon.config import ChannelMapping, LoadedConfig, load_config, parse_config
from wrtfd.daemon.mapping import apply_mapping
from wrtfd.daemon.rates import RateMeter
from wrtfd.daemon.supervise import Backoff, supervise
from wrtfd.daemon.wiring import build_source, check_buildable, prepare, resolve_option_paths
from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError, SourceError
from wrtfd.sources.base import SourceState, SourceStats

REPO = Path(__file__).resolve().parents[2]

DEFINITION = {"frame": {"fields": [{"name": n, "type": "float32"} for n in ("speed", "rpm", "gear")]}}


def _loaded(data: dict[str, Any], tmp_path: Path) -> LoadedConfig:
    return LoadedConfig(config=parse_config(data, "t.toml"), origin="t.toml", base_dir=tmp_path)


def test_mapping_filters_and_renames_definition_and_samples() -> None:
    mapping = ChannelMapping(include=("speed", "rpm"), rename={"rpm": "engine_rpm"})
    definition, transform = apply_mapping(DEFINITION, mapping, "t.toml: sources[0].mapping")
    assert [f["name"] for f in definition["frame"]["fields"]] == ["speed", "engine_rpm"]
    assert [f["name"] for f in DEFINITION["frame"]["fields"]] == ["speed", "rpm", "gear"]  # not mutated
    assert transform is not None
    out = transform(
        Sample("forza", 1, {"speed": 1.0, "rpm": 2.0, "gear": 3}, stale=frozenset({"rpm", "gear"}))
    )
    assert out.values == {"speed": 1.0, "engine_rpm": 2.0}
    assert out.stale == frozenset({"engine_rpm"})
    assert out.source == "forza" and out.rx_ns == 1


def test_empty_mapping_costs_nothing() -> None:
    definition, transform = apply_mapping(DEFINITION, ChannelMapping(), "w")
    assert transform is None and definition == DEFINITION


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        (ChannelMapping(include=("speeed",)), r"w.include: no field 'speeed'; fields are: speed, rpm, gear"),
        (ChannelMapping(rename={"nope": "x"}), r"w.rename: no field 'nope'"),
        (ChannelMapping(rename={"rpm": "speed"}), r"w.rename: two channels would share a name"),
        (ChannelMapping(include=()), r"w.include: keeps no field"),
    ],
)
def test_mapping_errors_name_the_key(mapping: ChannelMapping, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apply_mapping(DEFINITION, mapping, "w")


def test_option_paths_are_relative_to_the_config(tmp_path: Path) -> None:
    out = resolve_option_paths(
        {"dbc": "car.dbc", "layout_file": "/abs/x", "game": "fm2023", "n": 3}, tmp_path
    )
    assert out == {"dbc": str(tmp_path / "car.dbc"), "layout_file": "/abs/x", "game": "fm2023", "n": 3}


def test_build_udp_source_with_protocol_default_port(tmp_path: Path) -> None:
    loaded = _loaded(
        {"sources": [{"kind": "udp", "protocol": "f1", "mapping": {"include": ["speed"]}}]}, tmp_path
    )
    from wrtfd.decoders import registry

    built = build_source(loaded, 0, loaded.config.sources[0])
    assert built.address == f"udp 0.0.0.0:{registry.get('f1').default_port}"
    assert [f["name"] for f in built.definition["frame"]["fields"]] == ["speed"]


def test_udp_read_interval_reaches_the_source(tmp_path: Path) -> None:
    """The CPU / crash-bound trade-off is the user's: default 0.2 s, any value in [0, 1] passed on."""
    from wrtfd.sources.udp import DEFAULT_READ_INTERVAL_S, UdpSource

    sources = [
        {"kind": "udp", "protocol": "f1"},
        {"kind": "udp", "protocol": "forza", "read_interval_s": 0.1},
        {"kind": "udp", "protocol": "outgauge", "read_interval_s": 0},
    ]
    loaded = _loaded({"sources": sources}, tmp_path)
    built = [build_source(loaded, i, s).source for i, s in enumerate(loaded.config.sources)]
    got = [s.read_interval_s for s in built if isinstance(s, UdpSource)]
    assert got == [DEFAULT_READ_INTERVAL_S, 0.1, 0.0]
    assert DEFAULT_READ_INTERVAL_S == 0.2


def test_bad_decoder_option_is_a_config_error_at_its_key(tmp_path: Path) -> None:
    loaded = _loaded(
        {"sources": [{"kind": "udp", "protocol": "forza", "port": 5300, "options": {"colour": "red"}}]},
        tmp_path,
    )
    with pytest.raises(ConfigError, match=r"^t.toml: sources\[0\].options: "):
        build_source(loaded, 0, loaded.config.sources[0])


def test_prepare_creates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "rec"
    loaded = _loaded(
        {
            "sources": [{"kind": "udp", "protocol": "forza", "port": 5300}],
            "recorder": {"output_dir": str(out)},
        },
        tmp_path,
    )
    daemon = prepare(loaded, env={})
    assert daemon.output_dir == out
    assert [h.source.name for h in daemon.handles] == ["forza"]
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_no_frame_driving_source_is_refused(tmp_path: Path) -> None:
    loaded = _loaded(
        {"sources": [{"kind": "udp", "protocol": "forza", "port": 5300, "drives_frames": False}]}, tmp_path
    )
    with pytest.raises(ConfigError, match="at least one source needs drives_frames = true"):
        check_buildable(loaded)


def test_example_simrig_and_struct_feed_build(tmp_path: Path) -> None:
    for name in ("simrig.toml", "struct-feed.toml"):
        check_buildable(load_config(REPO / "config" / name))


def test_example_incar_builds_with_its_shipped_dbc() -> None:
    built = check_buildable(load_config(REPO / "config" / "incar.toml"))
    can = next(b for b in built if b.config.source_name == "can")
    fields = {f["name"] for f in can.definition["frame"]["fields"]}
    assert {"rpm", "throttle", "brake_pressure", "steering_angle", "wheel_speed_fl"} <= fields


def test_example_incar_builds_with_a_real_dbc(tmp_path: Path, shared_data: Path) -> None:
    text = (REPO / "config" / "incar.toml").read_text()
    dbc = shared_data / "can" / "subaru" / "sample_can_spec.dbc"
    path = tmp_path / "incar.toml"
    assert '"example-car.dbc"' in text
    path.write_text(text.replace('"example-car.dbc"', f'"{dbc}"'))
    loaded = load_config(path)
    check_buildable(loaded)
    gps, can = loaded.config.sources
    assert (gps.kind, gps.protocol, can.protocol) == ("serial", "nmea", "slcan")
    assert tomllib.loads(text)["recorder"]["rate_hz"] == loaded.config.recorder.rate_hz


# --- supervisor ------------------------------------------------------------------------------


def test_backoff_doubles_caps_and_resets() -> None:
    b = Backoff(0.5, 4.0)
    assert [b.after_run(0.0) for _ in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert b.after_run(10.0) == 0.5  # a long healthy run starts the delays over
    assert b.after_run(0.0) == 1.0


class FlakySource:
    """Fails ``failures`` times at start (like a port in use), then runs until cancelled."""

    def __init__(self, failures: int) -> None:
        self.name = "flaky"
        self.stats = SourceStats()
        self.failures = failures
        self.runs = 0

    async def run(self, sink: Any, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        self.runs += 1
        if self.runs <= self.failures:
            raise SourceError(f"cannot bind (attempt {self.runs})")
        self.stats.set_state(SourceState.LISTENING)
        task_status.started()
        sink(Sample("flaky", self.runs, {"x": 1}))
        await anyio.sleep_forever()


@pytest.mark.anyio
async def test_supervisor_restarts_until_the_source_comes_up() -> None:
    src = FlakySource(failures=3)
    got: list[Sample] = []
    ready: list[bool] = []
    delivered = anyio.Event()

    def sink(sample: Sample) -> None:
        got.append(sample)
        delivered.set()

    async with anyio.create_task_group() as tg:
        await tg.start(
            lambda task_status: supervise(
                src, sink, Backoff(0.001, 0.004), on_ready=lambda: ready.append(True), task_status=task_status
            )
        )
        assert ready == [True]  # reported at the first failure: READY never waits on one source
        with anyio.fail_after(5):
            await delivered.wait()
        tg.cancel_scope.cancel()
    assert src.runs == 4 and src.stats.restarts == 3
    assert got[0].rx_ns == 4


class BrokenSource(FlakySource):
    """Raises a bug-like error on every run; sets ``failed_often`` after five."""

    def __init__(self) -> None:
        super().__init__(0)
        self.failed_often = anyio.Event()

    async def run(self, sink: Any, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        self.runs += 1
        if self.runs >= 5:
            self.failed_often.set()
        raise RuntimeError("decoder bug")


@pytest.mark.anyio
async def test_a_failing_source_never_cancels_its_siblings() -> None:
    broken = BrokenSource()
    healthy = FlakySource(0)
    got: list[Sample] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: supervise(broken, got.append, Backoff(0.001, 0.002)))
        tg.start_soon(lambda: supervise(healthy, got.append, Backoff(0.001, 0.002)))
        with anyio.fail_after(5):
            await broken.failed_often.wait()
        assert healthy.runs == 1 and healthy.stats.state is SourceState.LISTENING
        assert broken.stats.restarts >= 4
        assert "decoder bug" in broken.stats.state_detail
        tg.cancel_scope.cancel()


def test_rate_meter_with_explicit_clock() -> None:
    m = RateMeter(alpha=1.0)
    assert m.update(0, 0.0) == 0.0
    assert m.update(60, 1.0) == 60.0
    assert m.update(90, 2.0) == 30.0
    assert m.update(10, 3.0) == 30.0  # a counter reset is not a negative rate
    assert m.update(10, 3.0) == 30.0  # no time passed


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_dds_source_builds_from_a_topic_map_next_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "imu.toml").write_text(
        '[rate]\nhz = 100\n[types.Imu]\nmembers = [{ name = "ax", type = "float" }, '
        '{ name = "gyro", type = "double[3]" }]\n'
        '[[topics]]\ntopic = "rt/imu"\ntype = "Imu"\n[topics.channels]\n"ax" = "ax"\n"gyro[2]" = "yaw_rate"\n'
    )
    cfg = tmp_path / "wrtfd.toml"
    cfg.write_text('[[sources]]\nkind = "dds"\nname = "robot"\nport = 7410\ntopic_map = "imu.toml"\n')
    loaded = load_config(cfg)
    built = build_source(loaded, 0, loaded.config.sources[0])
    assert built.address == "tcp 127.0.0.1:7410 (listen)"
    from wrtfd.recorder.compose import source_frame_fields

    assert source_frame_fields(built.definition) == ["ax", "yaw_rate"]
    check_buildable(loaded)
    cfg.write_text('[[sources]]\nkind = "dds"\nport = 7410\ntopic_map = "missing.toml"\n')
    with pytest.raises(ConfigError, match=r"sources\[0\].topic_map: "):
        check_buildable(load_config(cfg))


def test_assetto_corsa_source_dials_the_game(tmp_path: Path) -> None:
    loaded = _loaded({"sources": [{"kind": "assetto_corsa", "host": "192.168.1.20"}]}, tmp_path)
    built = build_source(loaded, 0, loaded.config.sources[0])
    assert built.address == "udp peer 192.168.1.20:9996"
    assert built.source.name == "assetto_corsa"
    assert built.definition["frame"]["fields"]


def test_call_turns_config_complaints_into_config_errors_and_lets_bugs_through() -> None:
    """An unknown option is the user's mistake; a TypeError inside our own code is a bug."""
    from wrtfd.daemon.wiring import _call

    def build(size: int) -> int:
        if size < 0:
            raise ValueError("size must be >= 0")
        return len(size)  # type: ignore[arg-type]  # the bug: len() of an int

    with pytest.raises(ConfigError, match=r"^w\.options: .*unexpected keyword argument 'colour'"):
        _call("w", "options", build, 1, colour="red")  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match=r"^w\.options: size must be >= 0$") as info:
        _call("w", "options", build, -1)
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(TypeError, match="has no len"):
        _call("w", "options", build, 3)


def test_recorder_clock_reaches_every_group_and_is_checked(tmp_path: Path) -> None:
    sources = [
        {"kind": "udp", "protocol": "forza", "port": 5300, "group": "forza"},
        {"kind": "udp", "protocol": "f1", "port": 20777, "group": "f1"},
    ]
    default = prepare(_loaded({"sources": sources}, tmp_path), env={})
    assert all(g._timeline is None for g in default.recorder.groups.values())  # arrival: unchanged
    source = prepare(_loaded({"sources": sources, "recorder": {"clock": "source"}}, tmp_path), env={})
    timelines = {name: g._timeline for name, g in source.recorder.groups.items()}
    assert set(timelines) == {"forza", "f1"} and all(t is not None for t in timelines.values())
    with pytest.raises(ConfigError, match=r"recorder.clock: .*'arrival' or 'source'"):
        parse_config({"sources": sources, "recorder": {"clock": "wall"}}, "t.toml")
