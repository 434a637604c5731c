"""The daemon's configuration: one TOML file, validated once at start by frozen pydantic models.

This is the only module that reads TOML or the environment for configuration. Unknown keys are
errors (``extra="forbid"``), types are strict (a port written as ``"5300"`` is a mistake, not a
guess), and every error names the file, the key path (``sources[1].port``) and what was expected.

Where the environment matters (systemd):

- ``$CONFIGURATION_DIRECTORY/wrtfd.toml`` is used when ``--config`` is not given;
- a relative ``recorder.output_dir`` is taken relative to ``$STATE_DIRECTORY`` when set, else the
  current directory; relative source ``definition`` and ``track`` paths are relative to the config
  file.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from wrtfd.daemon.defaults import default_config_data, state_directory
from wrtfd.defaults import (
    ARRIVAL_BUNCH_S,
    INFO_WAIT_S,
    RAW_TAP_MAX_BYTES,
    RECORDER_RATE_HZ,
    SESSION_IDLE_S,
    UDP_MAX_DATAGRAM_BYTES,
    UDP_READ_INTERVAL_S,
)
from wrtfd.errors import ConfigError
from wrtfd.fleet.config import FleetConfig
from wrtfd.recorder import durability

__all__ = [
    "CONFIG_FILE_NAME",
    "DEFAULT_GROUP",
    "AccSourceConfig",
    "AssettoCorsaSourceConfig",
    "ChannelMapping",
    "Config",
    "DaemonConfig",
    "DdsSourceConfig",
    "FoxgloveConfig",
    "GroupConfig",
    "Gt7SourceConfig",
    "LoadedConfig",
    "LoggingConfig",
    "RecorderConfig",
    "SerialSourceConfig",
    "SourceConfig",
    "StatusConfig",
    "UbxLinkConfig",
    "UdpSourceConfig",
    "WebConfig",
    "check_protocols",
    "default_config",
    "format_validation_error",
    "load_config",
    "load_effective_config",
    "parse_config",
    "resolve_config_path",
    "state_directory",
]

#: File looked up in ``$CONFIGURATION_DIRECTORY`` when no ``--config`` is given.
CONFIG_FILE_NAME = "wrtfd.toml"

#: A config file bigger than this is not a config file (bounded input).
MAX_CONFIG_BYTES = 1 << 20

#: How many validation errors one ConfigError lists before summarising.
MAX_REPORTED_ERRORS = 10

#: Source names become channel prefixes ("forza.speed"), so they are identifiers.
SOURCE_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
#: The recording group of sources that name none.
DEFAULT_GROUP = "main"

Port = Annotated[int, Field(ge=1, le=65535)]
PositiveSeconds = Annotated[float, Field(gt=0, le=86400 * 7)]
LoosePath = Annotated[Path, Field(strict=False)]


def _path_or_table(value: Any) -> str:
    return "<table>" if isinstance(value, dict) else "<path>"


#: ``recorder.schema``: one path, or a table of group -> path. The tags (skipped in error paths)
#: make pydantic report the one form that was meant, not both.
PinnedSchema = Annotated[
    Annotated[LoosePath, Tag("<path>")]
    | Annotated[dict[Annotated[str, Field(pattern=SOURCE_NAME_PATTERN)], LoosePath], Tag("<table>")],
    Discriminator(_path_or_table),
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


def _check_ip(value: str) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"expected an IP address such as 127.0.0.1, got {value!r}") from None
    return value


HostIP = Annotated[str, AfterValidator(_check_ip)]

#: A channel name of a source (a top-level frame field).
TrackField = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$")]


class ChannelMapping(_Model):
    """Which of a protocol's frame fields are recorded, and under which channel names.

    ``include`` keeps only the named fields (all when absent); ``rename`` maps a protocol field
    name to the channel name in the file. Both use the protocol's top-level frame field names.
    """

    include: Annotated[tuple[str, ...], Field(strict=False)] | None = None
    rename: dict[str, str] = Field(default_factory=dict)

    @field_validator("rename")
    @classmethod
    def _unique_targets(cls, value: dict[str, str]) -> dict[str, str]:
        targets = list(value.values())
        dup = sorted({t for t in targets if targets.count(t) > 1})
        if dup:
            raise ValueError(f"two fields renamed to the same channel name: {', '.join(dup)}")
        return value


class _SourceBase(_Model):
    name: Annotated[str, Field(pattern=SOURCE_NAME_PATTERN)] | None = None
    protocol: str
    #: Keyword options handed to the protocol's decoder (e.g. ``dbc = "/etc/wrtfd/car.dbc"``).
    options: dict[str, Any] = Field(default_factory=dict)
    mapping: ChannelMapping = Field(default_factory=ChannelMapping)
    #: WRTF definition file of the frame fields, for protocols without a fixed one (struct feeds).
    definition: LoosePath | None = None
    #: A required source that is silent longer than ``silent_after_s`` makes /healthz answer 503.
    required: bool = False
    silent_after_s: PositiveSeconds = 10.0
    #: This source's samples start frames (False: its values ride along with the others').
    drives_frames: bool = True
    #: Values older than this are marked stale in frames (None: held until replaced).
    stale_after_s: PositiveSeconds | None = None
    #: Restart backoff after a failure: doubles from ``restart_backoff_s`` up to the max.
    restart_backoff_s: PositiveSeconds = 0.5
    restart_backoff_max_s: PositiveSeconds = 30.0
    #: Track file (format 2.0) of the circuit: the recorder adds lap channels from this source's
    #: positions (``laps.lap_number``, ...) and the best lap to the session footer.
    track: LoosePath | None = None
    #: The two channels holding the track's x and z (ground plane), as recorded (after
    #: ``mapping``); None: the protocol's own (Forza, F1, OutSim, Codemasters).
    track_position: Annotated[tuple[TrackField, TrackField], Field(strict=False)] | None = None
    #: -1 when the feed's second ground axis points the other way (LFS OutSim's y forward).
    track_z_sign: Literal[1, -1] | None = None
    #: Lane of the track file the lap distance is measured along.
    track_lane: Annotated[int, Field(ge=0, le=255)] = 0
    #: Reference lap of the live delta (``laps.delta``): ``"FILE[:LAP]"`` or
    #: ``"FILE:SESSION.LAP"``, a WRTF recording with lap channels (its fastest lap without LAP),
    #: with ``track`` or ``circuit``; None: the session's best lap so far.
    reference: str | None = None
    #: Circuit file (docs/circuits.md; or a track file laid on the globe) for lap channels from
    #: this GNSS source's latitude and longitude; ``"auto"``: the circuit of ``circuits`` or of
    #: the shipped library whose start/finish line is nearest the first fix.
    circuit: LoosePath | None = None
    #: A folder of the user's circuit files to pick from (implies ``circuit = "auto"``).
    circuits: LoosePath | None = None
    #: ``auto``: how near the first fix a circuit's start/finish line must be (metres).
    circuit_pick_m: Annotated[float, Field(gt=0, le=100_000)] = 3000.0
    #: GNSS laps: seconds of fixes after a line before its crossing is timed again, smoothed both
    #: ways (the lap shown at the line is replaced; lap records wait for it); 0: final at the line.
    refine_lag_s: Annotated[float, Field(ge=0, le=600)] = 60.0
    #: Recording group: sources of one group share files, frames and ticks; each group records
    #: its own files. Unset: the shared group ``main``. The built-in default gives every game
    #: its own group, so the game that plays records a file with only its channels.
    group: Annotated[str, Field(pattern=SOURCE_NAME_PATTERN)] | None = None
    #: Keep every input this source receives in its group's raw tap (pcapng beside the WRTF
    #: file); None: as ``recorder.raw_tap`` says for the group.
    raw_tap: bool | None = None

    @property
    def source_name(self) -> str:
        """The configured name, or the protocol's name when none is given."""
        return self.name or self.protocol

    @property
    def group_name(self) -> str:
        return self.group or DEFAULT_GROUP

    @model_validator(mode="after")
    def _backoff_order(self) -> _SourceBase:
        if self.restart_backoff_max_s < self.restart_backoff_s:
            raise ValueError("restart_backoff_max_s must be >= restart_backoff_s")
        return self

    @model_validator(mode="after")
    def _track_keys(self) -> _SourceBase:
        if self.track is None:
            given = {
                "track_position": self.track_position is not None,
                "track_z_sign": self.track_z_sign is not None,
                "track_lane": self.track_lane != 0,
                "reference": self.reference is not None and self.circuit is None and self.circuits is None,
            }
            for key, present in given.items():
                if present:
                    but = (
                        "neither `track` nor `circuit` is"
                        if key == "reference"
                        else "`track` (the track file) is not"
                    )
                    raise ValueError(f"{key} is set but {but}")
        elif self.track_position is not None and self.track_position[0] == self.track_position[1]:
            raise ValueError("track_position: x and z must be two different channels")
        if self.track is not None and (self.circuit is not None or self.circuits is not None):
            raise ValueError("circuit: a source has either a track (game positions) or a circuit (GNSS)")
        if self.circuits is not None and self.circuit is not None and not self.auto_circuit:
            raise ValueError(
                'circuits: the folder is for picking a circuit; `circuit` names one (or say "auto")'
            )
        return self

    @property
    def auto_circuit(self) -> bool:
        """Whether the circuit is picked by position (``circuit = "auto"`` or a ``circuits`` folder)."""
        return str(self.circuit) == "auto" or (self.circuit is None and self.circuits is not None)

    @property
    def has_laps(self) -> bool:
        return self.track is not None or self.circuit is not None or self.circuits is not None


class UdpSourceConfig(_SourceBase):
    """A game that sends UDP datagrams to us (Forza, F1, OutGauge, DiRT, struct feeds)."""

    kind: Literal["udp"]
    #: Games usually run on another machine, so sources listen on every interface by default.
    host: HostIP = "0.0.0.0"
    #: None: the protocol's usual port.
    port: Port | None = None
    #: Sender IPs or networks accepted ("192.168.1.0/24"); absent: anyone.
    allow_from: Annotated[tuple[str, ...], Field(strict=False)] | None = None
    max_datagram_bytes: Annotated[int, Field(ge=1, le=65507)] = UDP_MAX_DATAGRAM_BYTES
    #: Kernel receive buffer: the only queue on the receive path.
    rcvbuf_bytes: Annotated[int, Field(ge=4096, le=1 << 28)] = 1 << 20
    #: A steady feed is read in batches this often (seconds; 0: on arrival). CPU against the
    #: crash bound: each 0.1 s less costs about a third more CPU and bounds a crash 0.1 s tighter.
    read_interval_s: Annotated[float, Field(ge=0, le=1)] = UDP_READ_INTERVAL_S

    @field_validator("allow_from")
    @classmethod
    def _allowlist(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """Parsed by the source's own allowlist, so the error names this key at start."""
        if value is not None:
            from wrtfd.sources.udp import SenderAllowlist

            try:
                SenderAllowlist(value)
            except ConfigError as exc:
                raise ValueError(str(exc).removeprefix("allow_from: ")) from None
        return value


class AssettoCorsaSourceConfig(_SourceBase):
    """Assetto Corsa remote telemetry: we handshake with the game and it streams back to us."""

    kind: Literal["assetto_corsa"]
    protocol: str = "assetto_corsa"
    host: HostIP = "127.0.0.1"
    port: Port = 9996


#: A text the game receives in the registration: UTF-8, at most 255 bytes (checked by the source).
AccText = Annotated[str, Field(max_length=255)]


class AccSourceConfig(_SourceBase):
    """Assetto Corsa Competizione broadcasting: we register with the game, it streams back to us.

    ``password`` is the ``connectionPassword`` of the game's ``broadcasting.json``, ``port`` its
    ``updListenerPort``; ``command_password`` its ``commandPassword`` (only needed for commands,
    which wrtfd does not send: without it the game registers us read-only).
    """

    kind: Literal["acc"]
    protocol: Literal["acc"] = "acc"
    host: HostIP = "127.0.0.1"
    port: Port = 9000
    password: AccText = ""
    command_password: AccText = ""
    display_name: Annotated[str, Field(min_length=1, max_length=64)] = "wrtfd"
    #: How often the game sends the realtime (car) updates.
    update_interval_ms: Annotated[int, Field(ge=10, le=10_000)] = 100


# --- issue 14: Gran Turismo 7 -------------------------------------------------------------------
class Gt7SourceConfig(_SourceBase):
    """Gran Turismo 7: we heartbeat the console and it streams back to us (wrtfd.sources.gt7)."""

    kind: Literal["gt7"]
    protocol: Literal["gt7"] = "gt7"
    #: The PlayStation's IP address (its network settings show it): heartbeats go there.
    console: HostIP
    #: Packet variant to ask for: A 296 B, B 316 B, ~ 344 B, C 368 B; absent: the richest the
    #: console answers (C, then ~, B, A).
    variant: Literal["A", "B", "~", "C"] | None = None
    #: Local address and port the console streams to (it always sends to port 33740).
    host: HostIP = "0.0.0.0"
    port: Port = 33740
    console_port: Port = 33739
    heartbeat_interval_s: Annotated[float, Field(gt=0, le=10)] = 1.5
    #: Without a fixed variant: how long each letter is tried before the next one.
    probe_s: Annotated[float, Field(gt=0, le=60)] = 3.0
    #: No packet for this long: the stream is lost and asked for again.
    stream_timeout_s: Annotated[float, Field(gt=0, le=60)] = 3.0
    rcvbuf_bytes: Annotated[int, Field(ge=4096, le=1 << 28)] = 1 << 20
    read_interval_s: Annotated[float, Field(ge=0, le=1)] = UDP_READ_INTERVAL_S


# --- end issue 14 --------------------------------------------------------------------------------


#: Baud rates of a u-blox UART (the ``ubx.baud`` choices; wrtfd.decoders.ubx_config probes them).
_UbxBauds = Literal[4800, 9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600]


class UbxLinkConfig(_Model):
    """How wrtfd sets a u-blox receiver up (``protocol = "ubx"``; docs/gnss.md)."""

    #: False: record what the receiver sends, never talk to it.
    configure: bool = True
    #: Measurement rate; a module that cannot run this fast refuses it (NAK, one log line).
    rate_hz: Annotated[int, Field(ge=1, le=25)] = 10
    #: Switch the receiver's UART to this baud rate after setting it up (absent: stay).
    baud: _UbxBauds | None = None
    #: Stop the receiver's NMEA output on the port (only UBX is recorded).
    nmea_off: bool = False
    dynamic_model: Literal[
        "portable", "stationary", "pedestrian", "automotive", "sea", "airborne1g", "airborne2g", "airborne4g"
    ] = "automotive"
    #: The receiver's port the device is wired to; auto: usb for /dev/ttyACM*, else uart1.
    port: Literal["auto", "uart1", "uart2", "usb"] = "auto"
    #: How long each setting waits for its ACK.
    ack_timeout_s: Annotated[float, Field(gt=0, le=10)] = 1.0
    #: How long each baud rate tried on connect waits for the MON-VER answer.
    probe_timeout_s: Annotated[float, Field(gt=0, le=10)] = 1.0
    #: NAV-PVT are counted this long after the set-up; under 80 % of rate_hz is a problem (0: no check).
    rate_check_s: Annotated[float, Field(ge=0, le=60)] = 2.0


class SerialSourceConfig(_SourceBase):
    """A serial logger (GPS NMEA or u-blox UBX, CAN through SLCAN, OBD-II ELM327)."""

    kind: Literal["serial"]
    #: Prefer /dev/serial/by-id/... : stable across replugs.
    device: str = Field(min_length=1)
    baudrate: Annotated[int, Field(ge=50, le=4_000_000)] = 9600
    parity: Literal["N", "E", "O"] = "N"
    #: No byte for this long counts as a lost device (absent: never).
    idle_timeout_s: PositiveSeconds | None = None
    #: Keyword options of the protocol's serial source (SLCAN ``bitrate``, OBD ``obd_protocol``...).
    link_options: dict[str, Any] = Field(default_factory=dict)
    #: u-blox set-up (``protocol = "ubx"`` only; absent: the defaults).
    ubx: UbxLinkConfig | None = None

    @model_validator(mode="after")
    def _ubx_only_for_ubx(self) -> SerialSourceConfig:
        if self.ubx is not None and self.protocol != "ubx":
            raise ValueError(f'the `ubx` table is for protocol = "ubx", not {self.protocol!r}')
        return self


class DdsSourceConfig(_SourceBase):
    """A DDS-like TCP stream (zddsrec frames)."""

    kind: Literal["dds"]
    protocol: Literal["zddsrec"] = "zddsrec"
    #: listen: peers connect to us; connect: we dial one peer and redial on failure.
    mode: Literal["listen", "connect"] = "listen"
    host: HostIP = "127.0.0.1"
    port: Port
    #: Topic-to-channel mapping (TOML, see wrtfd.zddsrec.mapping); relative to this config file.
    topic_map: LoosePath


SourceConfig = Annotated[
    UdpSourceConfig
    | AssettoCorsaSourceConfig
    | AccSourceConfig
    | Gt7SourceConfig
    | SerialSourceConfig
    | DdsSourceConfig,
    Field(discriminator="kind"),
]


class RecorderConfig(_Model):
    """Recorder policy: where files go, how sessions and files are cut, how often data hits disk."""

    #: Relative paths are relative to $STATE_DIRECTORY under systemd, else the current directory.
    output_dir: LoosePath = Path("recordings")
    #: File name template; None uses the recorder's default.
    file_template: str | None = None
    rate_hz: Annotated[int, Field(ge=1, le=1000)] = RECORDER_RATE_HZ
    #: Whose clock places samples: ``arrival`` (when they were received; what a live game
    #: needs) or ``source`` (the first driving source's own timestamps, for feeds that do not
    #: arrive in real time: an accelerated simulator, a logger dumping its memory, a replay).
    #: See docs/daemon.md, "Source clock".
    clock: Literal["arrival", "source"] = "arrival"
    #: A pause in every driving source longer than this ends the session.
    session_idle_s: PositiveSeconds = SESSION_IDLE_S
    #: How long a new session's header waits for the track a game sends on its own (ACC's
    #: track data, Project CARS' race definition); its frames are held meanwhile. 0: no wait.
    info_wait_s: Annotated[float, Field(ge=0, le=60)] = INFO_WAIT_S
    max_session_s: PositiveSeconds | None = None
    rotate_bytes: Annotated[int, Field(ge=4096)] | None = None
    rotate_s: PositiveSeconds | None = None
    rotate_sessions: Annotated[int, Field(ge=1)] | None = None
    #: Written data is fsynced at least this often (the power-cut term of docs/durability.md).
    fsync_interval_s: PositiveSeconds = durability.FSYNC_INTERVAL_S
    #: How long a tick stays open for late or bunched samples (docs/timing.md); with ``clock =
    #: "source"``, also how long a silent clock source is waited for. More: a stalling feed is
    #: ridden out; the frames' latency and a crash's loss grow by as much (docs/durability.md).
    jitter_s: Annotated[float, Field(ge=ARRIVAL_BUNCH_S, le=2.0)] = durability.JITTER_S
    #: How often the recorder's engine turns samples into frames: idle CPU against latency
    #: (frames reach the writer up to this much later; durability is bounded by fsync anyway).
    engine_tick_s: Annotated[float, Field(ge=0.001, le=0.5)] = durability.TICK_S
    #: Bound of the intake between sources and the recorder, in samples.
    queue_size: Annotated[int, Field(ge=16, le=1_000_000)] = 4096
    #: File-level metadata ("Track", "Driver", ...), stored in every file. Keys the writer
    #: writes itself (``wrtf.schema``, the frame check's ``wrtfd.check*``) are refused.
    metadata: dict[str, str] = Field(default_factory=dict)
    #: Pin the frame layout: a WRTF definition (``wrtfd config schema`` writes one) that the
    #: frame composed from the sources must match, checked at start, so that a changed config or
    #: an upgrade cannot silently change what downstream tools read. A path for the only
    #: recording group, or a table ``{group = path}``. Relative to the config file.
    #: (``schema`` in the file; the attribute name avoids pydantic's deprecated ``schema()``.)
    frame_schema: PinnedSchema | None = Field(default=None, alias="schema")
    #: The raw tap (pcapng files beside the WRTF files, docs/daemon.md): true for every group,
    #: or the recording groups to tap; a source's own ``raw_tap`` overrides it.
    raw_tap: (
        bool | Annotated[tuple[Annotated[str, Field(pattern=SOURCE_NAME_PATTERN)], ...], Field(strict=False)]
    ) = False
    #: All tap files together stay under this; the oldest is removed first.
    raw_tap_max_bytes: Annotated[int, Field(ge=1 << 20)] = RAW_TAP_MAX_BYTES

    @field_validator("metadata")
    @classmethod
    def _writable_metadata(cls, value: dict[str, str]) -> dict[str, str]:
        """The writer's own rule (:func:`wrtfd.recorder.files.check_metadata`), at start rather
        than at the first file."""
        from wrtfd.errors import FormatError
        from wrtfd.recorder.files import check_metadata

        try:
            check_metadata(value)
        except FormatError as exc:
            raise ValueError(str(exc)) from None
        return value


class StatusConfig(_Model):
    """The local HTTP status endpoint (``/status``, ``/metrics``, ``/healthz``)."""

    enabled: bool = True
    #: Loopback unless configured otherwise: the endpoint has no authentication.
    host: HostIP = "127.0.0.1"
    port: Port = 8787
    #: /healthz answers 503 when the recording file system has less free space than this.
    min_free_mb: Annotated[float, Field(ge=0)] = 200.0


# --- [foxglove]: the live Foxglove WebSocket server (issue 16; wrtfd/daemon/foxglove_live.py) ---


class FoxgloveConfig(_Model):
    """The live view in Foxglove (``wrtfd[foxglove]``): frames over the Foxglove WebSocket protocol."""

    #: 0 (the default): off. Foxglove's usual port is 8765.
    port: Annotated[int, Field(ge=0, le=65535)] = 0
    #: Loopback unless configured otherwise: the server has no authentication; a LAN address
    #: (or 0.0.0.0) lets anyone on that network watch the car.
    host: HostIP = "127.0.0.1"
    #: Live frames are sent at most this often per recording group (decimated from the frames).
    rate_hz: Annotated[float, Field(gt=0, le=1000)] = 20.0
    #: Messages queued per client; a client that reads slower loses the oldest ones.
    client_backlog: Annotated[int, Field(ge=16, le=65536)] = 256

    @property
    def enabled(self) -> bool:
        return self.port != 0


# --- end [foxglove] ---


# --- [web] and [groups.NAME] (the pit-wall page, markers, pre-trigger capture) ------------------


class WebConfig(_Model):
    """The page on the status port (``/``), its pushed updates and the mark / new-session API."""

    #: Serve the page and its API (False: ``/status``, ``/metrics``, ``/healthz`` only).
    enabled: bool = True
    #: Needed for changes (mark, new session) when ``[status] host`` is not loopback; absent: a
    #: random one is kept in ``<output_dir>/.wrtfd-web-token`` (shown by ``wrtfd config show``).
    token: Annotated[str, Field(min_length=16, max_length=256, pattern=r"^[\x21-\x7e]+$")] | None = None
    #: Off loopback: the page and read-only endpoints without the token.
    public_read: bool = False
    #: Host names (besides IP addresses and localhost) the page may be opened as ("pi.local").
    allowed_hosts: Annotated[
        tuple[Annotated[str, Field(pattern=r"^[A-Za-z0-9.-]{1,253}$")], ...], Field(strict=False)
    ] = ()
    #: Channels shown live: roles (speed, rpm, throttle, brake, gear) or ``source.channel``.
    channels: Annotated[
        tuple[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]{0,127}$")], ...],
        Field(strict=False, max_length=16),
    ] = ("speed", "rpm", "throttle", "brake", "gear")
    #: Pushes per second to each page, at most (fewer with many pages open).
    push_hz: Annotated[float, Field(gt=0, le=10)] = 10.0
    #: Pages open at once; connections at once (a connection past it is closed at once).
    max_pages: Annotated[int, Field(ge=1, le=1000)] = 128
    max_connections: Annotated[int, Field(ge=4, le=10000)] = 192


class GroupConfig(_Model):
    """Options of one recording group (``[groups.NAME]``; ``[groups."*"]`` for every group)."""

    #: ``continuous``: record whenever data flows; ``triggered``: keep the last
    #: ``pre_trigger_s`` in memory and write from a trigger on (docs/markers.md).
    record: Literal["continuous", "triggered"] = "continuous"
    pre_trigger_s: Annotated[float, Field(ge=0, le=3600)] = 10.0
    post_trigger_s: Annotated[float, Field(ge=0, le=86400)] = 10.0
    #: A condition on the group's channels: ``speed > 5``, ``gear >= 1 and rpm > 3000``.
    trigger: Annotated[str, Field(min_length=1, max_length=512)] | None = None
    trigger_on_marker: bool = True
    trigger_on_session: bool = True
    #: Bound of the pre-trigger buffer (the oldest frames go first when it is reached).
    pre_trigger_max_bytes: Annotated[int, Field(ge=4096, le=1 << 34)] = 16 << 20

    @model_validator(mode="after")
    def _triggered_keys(self) -> GroupConfig:
        if self.record == "continuous" and self.trigger is not None:
            raise ValueError('trigger is set but record = "continuous" (set record = "triggered")')
        return self


class LoggingConfig(_Model):
    level: Literal["debug", "info", "warning", "error"] = "info"
    #: auto: journal style (``<N>`` prefixes, no timestamps) under systemd, else plain text lines.
    format: Literal["auto", "journal", "text"] = "auto"
    #: Repeated drop/restart messages of one kind are logged at most once per interval.
    repeat_interval_s: PositiveSeconds = 10.0


class DaemonConfig(_Model):
    #: The recorder counts as stuck (watchdog withheld, /healthz 503) when a write is pending longer.
    stall_after_s: PositiveSeconds = 5.0
    #: Time allowed for finalizing sessions and files on SIGTERM/SIGINT.
    shutdown_timeout_s: Annotated[float, Field(gt=0, le=60)] = 2.0


class Config(_Model):
    """The whole configuration file."""

    sources: Annotated[tuple[SourceConfig, ...], Field(min_length=1, strict=False)]
    recorder: RecorderConfig = Field(default_factory=RecorderConfig)
    status: StatusConfig = Field(default_factory=StatusConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    foxglove: FoxgloveConfig = Field(default_factory=FoxgloveConfig)  # [foxglove] (issue 16)
    web: WebConfig = Field(default_factory=WebConfig)
    groups: dict[Annotated[str, Field(pattern=r"^([a-z][a-z0-9_]{0,31}|\*)$")], GroupConfig] = Field(
        default_factory=dict
    )

    def group_config(self, group: str) -> GroupConfig:
        """``[groups.NAME]``, else ``[groups."*"]``, else the defaults (continuous)."""
        return self.groups.get(group) or self.groups.get("*") or GroupConfig()

    #: Live telemetry and uploads to the team's NATS server (docs/fleet.md); absent: none.
    fleet: FleetConfig | None = None

    @model_validator(mode="after")
    def _unique_sources(self) -> Config:
        seen: dict[str, int] = {}
        for i, src in enumerate(self.sources):
            name = src.source_name
            if name in seen:
                first = seen[name]
                raise ValueError(
                    f"sources[{i}] and sources[{first}] are both named {name!r}; give each a `name`"
                )
            seen[name] = i
        tracked: dict[str, int] = {}
        for i, src in enumerate(self.sources):
            if not src.has_laps:
                continue
            if src.group_name in tracked:
                raise ValueError(
                    f"sources[{i}].{'track' if src.track is not None else 'circuit'}: only one source per"
                    " recording group can have a track or circuit"
                    f" (sources[{tracked[src.group_name]}] in group {src.group_name!r} has one already)"
                )
            tracked[src.group_name] = i
        pinned = self.recorder.frame_schema
        groups = sorted({src.group_name for src in self.sources})
        if isinstance(pinned, dict):
            _known_groups("recorder.schema", pinned, groups)
        elif pinned is not None and len(groups) > 1:
            raise ValueError(
                f"recorder.schema: {len(groups)} recording groups ({', '.join(groups)}):"
                " give a table {group = path}"
            )
        unknown_groups = sorted(set(self.groups) - set(groups) - {"*"})
        if unknown_groups:
            raise ValueError(
                f"groups: no recording group {', '.join(map(repr, unknown_groups))}"
                f" (groups: {', '.join(groups)})"
            )
        if isinstance(self.recorder.raw_tap, tuple):
            _known_groups("recorder.raw_tap", self.recorder.raw_tap, groups)
        bound: list[tuple[int, str, int]] = []
        for i, src in enumerate(self.sources):
            if isinstance(src, UdpSourceConfig | Gt7SourceConfig) and src.port is not None:
                for j, host, port in bound:
                    if port == src.port and (host == src.host or "0.0.0.0" in (host, src.host)):
                        raise ValueError(f"sources[{i}] and sources[{j}] both listen on UDP port {port}")
                bound.append((i, src.host, src.port))
        return self


def _known_groups(key: str, named: Iterable[str], groups: Sequence[str]) -> None:
    """:raises ValueError: ``named`` holds a name that is not one of the recording ``groups``."""
    unknown = sorted(set(named) - set(groups))
    if unknown:
        raise ValueError(
            f"{key}: no recording group {', '.join(map(repr, unknown))} (groups: {', '.join(groups)})"
        )


class LoadedConfig(BaseModel):
    """A validated config and where it came from (``origin`` is a path or "built-in default")."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    config: Config
    origin: str
    base_dir: Path

    def output_dir(self, env: Mapping[str, str] | None = None) -> Path:
        out = self.config.recorder.output_dir
        if out.is_absolute():
            return out
        state = state_directory(os.environ if env is None else env)
        return (state if state is not None else Path.cwd()) / out

    def resolve(self, path: Path) -> Path:
        """A path from the config file, relative to the file's directory."""
        return path if path.is_absolute() else self.base_dir / path

    def definition_path(self, src: _SourceBase) -> Path | None:
        return None if src.definition is None else self.resolve(src.definition)

    def track_path(self, src: _SourceBase) -> Path | None:
        return None if src.track is None else self.resolve(src.track)

    def tapped(self, src: _SourceBase) -> bool:
        """Whether the raw tap keeps ``src``'s input (its own ``raw_tap``, else its group's)."""
        if src.raw_tap is not None:
            return src.raw_tap
        tap = self.config.recorder.raw_tap
        return tap if isinstance(tap, bool) else src.group_name in tap

    def schema_path(self, group: str) -> Path | None:
        """The definition ``recorder.schema`` pins for ``group`` (None: not pinned)."""
        pinned = self.config.recorder.frame_schema
        if isinstance(pinned, dict):
            path = pinned.get(group)
            return None if path is None else self.resolve(path)
        return None if pinned is None else self.resolve(pinned)


def resolve_config_path(explicit: Path | None, env: Mapping[str, str]) -> Path | None:
    """``--config`` wins; else ``$CONFIGURATION_DIRECTORY/wrtfd.toml`` if present; else None."""
    if explicit is not None:
        return explicit
    for directory in env.get("CONFIGURATION_DIRECTORY", "").split(":"):
        if directory:
            candidate = Path(directory) / CONFIG_FILE_NAME
            if candidate.is_file():
                return candidate
    return None


# --- error formatting --------------------------------------------------------------------------

_EXPECTED: dict[str, str] = {
    "int_type": "expected integer",
    "int_parsing": "expected integer",
    "int_from_float": "expected integer",
    "float_type": "expected number",
    "float_parsing": "expected number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected string",
    "dict_type": "expected a table",
    "model_type": "expected a table",
    "model_attributes_type": "expected a table",
    "tuple_type": "expected an array",
    "list_type": "expected an array",
    "path_type": "expected a path (string)",
    "extra_forbidden": "unknown key",
    "missing": "required key is missing",
    "union_tag_not_found": "required key `kind` is missing (udp | assetto_corsa | acc | gt7 | serial | dds)",
}


def _loc_path(loc: Sequence[int | str], data: object) -> str:
    """``("sources", 1, "udp", "port")`` -> ``sources[1].port`` (the union tag is not a key)."""
    parts: list[str] = []
    node: object = data
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
            node = node[item] if isinstance(node, list | tuple) and 0 <= item < len(node) else None
            continue
        if isinstance(node, dict) and item not in node and node.get("kind") == item:
            continue  # the discriminated union's tag, added by pydantic
        if item.startswith("<"):
            continue  # a tag of a union told apart by type (PinnedSchema)
        parts.append(f".{item}" if parts else item)
        node = node.get(item) if isinstance(node, dict) else None
    return "".join(parts)


def _describe(error: Mapping[str, Any]) -> str:
    kind = str(error.get("type", ""))
    if kind in _EXPECTED:
        text = _EXPECTED[kind]
        if kind not in ("missing", "extra_forbidden", "union_tag_not_found"):
            text += f", got {_toml_repr(error.get('input'))}"
        return text
    if kind == "union_tag_invalid":
        ctx = error.get("ctx") or {}
        return f"unknown source kind {ctx.get('tag')!r}; expected one of {ctx.get('expected_tags')}"
    if kind == "literal_error":
        ctx = error.get("ctx") or {}
        return f"expected one of {ctx.get('expected')}, got {_toml_repr(error.get('input'))}"
    if kind in (
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "too_short",
        "too_long",
    ):
        return f"{str(error.get('msg', '')).replace('Input should be', 'expected').replace('Input', 'value')}"
    if kind == "string_pattern_mismatch":
        got = _toml_repr(error.get("input"))
        return f"expected a lowercase identifier (letters, digits, _; up to 32), got {got}"
    msg = str(error.get("msg", "invalid value"))
    return msg.removeprefix("Value error, ")


def _toml_repr(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list | tuple):
        return "an array"
    return repr(value)


def format_validation_error(origin: str, exc: ValidationError, data: object) -> str:
    """Every problem on one line (an error is one line): ``FILE: key.path: what was expected;
    other.key: ...``."""
    lines = []
    errors = exc.errors()
    # A list whose items failed is also reported "too short" (failed items are left out of
    # the count): that second line is noise.
    locs = [tuple(e.get("loc", ())) for e in errors]
    errors = [
        e
        for e, loc in zip(errors, locs, strict=True)
        if not (e.get("type") == "too_short" and any(o[: len(loc)] == loc and o != loc for o in locs))
    ]
    for error in errors[:MAX_REPORTED_ERRORS]:
        path = _loc_path(error.get("loc", ()), data)
        lines.append(f"{path}: {_describe(error)}" if path else _describe(error))
    if len(errors) > MAX_REPORTED_ERRORS:
        lines.append(f"... and {len(errors) - MAX_REPORTED_ERRORS} more problems")
    return f"{origin}: " + "; ".join(" ".join(line.split()) for line in lines)


# --- loading -----------------------------------------------------------------------------------


def parse_config(data: Mapping[str, Any], origin: str) -> Config:
    """Validate parsed TOML; raises ConfigError naming ``origin`` and the key path."""
    try:
        return Config.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(format_validation_error(origin, exc, data)) from None


def check_protocols(config: Config, origin: str) -> None:
    """Every source names a protocol that exists and fits its kind (needs the decoder registry)."""
    from wrtfd.decoders import registry

    known = registry.all_protocols()
    wanted_transport = {
        "udp": "udp",
        "assetto_corsa": "udp",
        "acc": "udp",
        "gt7": "udp",
        "serial": "serial",
        "dds": "tcp",
    }
    for i, src in enumerate(config.sources):
        if isinstance(src, DdsSourceConfig):
            continue  # a DDS stream carries its own types; its topic map says what to record
        info = known.get(src.protocol)
        if info is None:
            names = ", ".join(sorted(known)) or "none installed"
            raise ConfigError(
                f"{origin}: sources[{i}].protocol: unknown protocol {src.protocol!r}; known: {names}"
            )
        transport = wanted_transport[src.kind]
        if info.transport != transport:
            raise ConfigError(
                f"{origin}: sources[{i}].protocol: {src.protocol!r} is a {info.transport} protocol, "
                f"but this source is kind = {src.kind!r}"
            )
        if isinstance(src, UdpSourceConfig) and src.port is None and info.default_port is None:
            raise ConfigError(f"{origin}: sources[{i}].port: required: {src.protocol!r} has no usual port")


def default_config(env: Mapping[str, str]) -> Config:
    """Validated built-in default (:mod:`wrtfd.daemon.defaults`) from the installed decoders."""
    from wrtfd.decoders import registry

    data = default_config_data(registry.all_protocols(), env)
    if not data["sources"]:
        raise ConfigError("built-in default: no UDP game protocol is installed; give a config with --config")
    return parse_config(data, "built-in default")


def load_config(path: Path) -> LoadedConfig:
    """Read, parse and validate one TOML file (protocols included)."""
    origin = str(path)
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{origin}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{origin}: is a directory, expected a TOML file") from None
    except OSError as exc:
        raise ConfigError(f"{origin}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{origin}: larger than {MAX_CONFIG_BYTES} bytes; not a config file")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{origin}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: invalid TOML: {exc}") from None
    config = parse_config(data, origin)
    check_protocols(config, origin)
    return LoadedConfig(config=config, origin=origin, base_dir=path.resolve().parent)


def load_effective_config(explicit: Path | None, env: Mapping[str, str] | None = None) -> LoadedConfig:
    """The config ``wrtfd run`` would use: ``--config``, the systemd config dir, or the default."""
    environ = os.environ if env is None else env
    path = resolve_config_path(explicit, environ)
    if path is not None:
        return load_config(path)
    config = default_config(environ)
    return LoadedConfig(config=config, origin="built-in default", base_dir=Path.cwd())
