"""``[fleet]``: where a rig publishes its live telemetry and uploads its files (NATS JetStream).

The pydantic model validates the section once, at start, like the rest of the config (unknown
keys are errors, types strict); :func:`fleet_settings` then resolves it into the typed
:class:`FleetSettings` the fleet code takes (paths made absolute, the rig name decided, the TLS
context built), so a missing certificate or credentials file is a config error (exit 2) before
anything starts, not a failure at the first connection.

Secrets (``token``, ``password``) are ``SecretStr``: ``wrtfd config show`` prints stars.
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from wrtfd.defaults import FLEET_STOP_UPLOAD_S
from wrtfd.errors import ConfigError

__all__ = [
    "DEFAULT_BUCKET",
    "RIG_PATTERN",
    "ConnectOptions",
    "FleetConfig",
    "FleetSettings",
    "check_url",
    "default_rig",
    "fleet_settings",
    "tls_context",
]

#: A rig name is one token of a NATS subject (``wrtfd.<rig>.status``) and a directory name.
RIG_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
DEFAULT_BUCKET = "wrtfd"
_RIG_RE = re.compile(RIG_PATTERN)

LoosePath = Annotated[Path, Field(strict=False)]


def check_url(value: str) -> str:
    """``nats://host:port`` or ``tls://host:port``, several separated by commas (a cluster)."""
    urls = [u.strip() for u in value.split(",") if u.strip()]
    if not urls:
        raise ValueError("expected a nats://HOST:PORT URL")
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("nats", "tls") or not parts.hostname:
            raise ValueError(f"expected nats://HOST:PORT or tls://HOST:PORT, got {url!r}")
        if parts.username or parts.password:
            raise ValueError("put credentials in token / user / password / creds, not in the URL")
        try:
            _ = parts.port
        except ValueError:
            raise ValueError(f"bad port in {url!r}") from None
    return ",".join(urls)


def default_rig(hostname: str | None = None) -> str:
    """The machine's host name as a rig name (dots and other characters become ``-``)."""
    name = hostname if hostname is not None else socket.gethostname()
    rig = re.sub(r"[^A-Za-z0-9_-]+", "-", name.split(".", 1)[0]).strip("-")[:64]
    return rig or "rig"


class FleetConfig(BaseModel):
    """The ``[fleet]`` table (absent: no fleet, the daemon never touches the network for it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    #: The team's NATS server(s): ``nats://pit-wall:4222`` (``tls://`` for TLS from the start);
    #: several separated by commas (a cluster). Or ``servers``, a list: give one of the two.
    url: str | None = None
    #: The nodes of a cluster, ``["nats://n1:4222", "nats://n2:4222", ...]``: the rig connects to
    #: one of them and moves to another when it goes away.
    servers: list[str] | None = None
    #: Replicas of the streams and buckets a rig creates (the cluster's size, at most 5; 1 for one
    #: server). Existing streams and buckets are left as they are.
    replicas: Annotated[int, Field(ge=1, le=5)] = 1
    #: This rig's name in subjects and in the bucket (default: the host name).
    rig: Annotated[str, Field(pattern=RIG_PATTERN)] | None = None
    token: SecretStr | None = None
    user: str | None = None
    password: SecretStr | None = None
    #: A NATS credentials file (JWT + nkey seed), relative to the config file.
    creds: LoosePath | None = None
    #: TLS: the CA that signed the server's certificate; a client certificate and key if the
    #: server asks for one. Relative to the config file.
    tls_ca: LoosePath | None = None
    tls_cert: LoosePath | None = None
    tls_key: LoosePath | None = None
    #: Live frames per second on ``wrtfd.<rig>.<group>.frames`` (0: none; at or above the
    #: recording rate: every frame).
    live_hz: Annotated[float, Field(ge=0, le=1000)] = 10.0
    #: How often the rig's status goes to ``wrtfd.<rig>.status``.
    status_interval_s: Annotated[float, Field(ge=0.5, le=300)] = 2.0
    #: Upload finished files to this JetStream object store bucket.
    upload: bool = True
    bucket: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")] = DEFAULT_BUCKET
    #: At start, also queue the finished files already in the recording directory that were
    #: never uploaded (recordings from before the fleet was set up, or left by a crash).
    upload_existing: bool = True
    #: Delete the local file once its upload is verified (never before).
    delete_after_upload: bool = False
    #: How an upload is checked before it counts as done: ``content`` reads the object back and
    #: compares its SHA-256 with the local file's; ``info`` checks the object's recorded digest,
    #: size and chunk count on the server (half the traffic).
    verify: Literal["content", "info"] = "content"
    #: Object store chunk size (the server's max_payload, 1 MiB by default, is the ceiling).
    chunk_bytes: Annotated[int, Field(ge=1024, le=1 << 20)] = 128 * 1024
    #: Upload bandwidth cap in bytes per second (None: as fast as the link goes).
    upload_rate_bytes_s: Annotated[int, Field(ge=1024)] | None = None
    #: The upload queue (one small JSON file per pending upload, and the log of done ones);
    #: relative to the recording directory. Default: ``.fleet`` in the recording directory.
    queue_dir: LoosePath | None = None
    connect_timeout_s: Annotated[float, Field(gt=0, le=60)] = 5.0
    #: At stop, how long queued uploads (the files just closed first among them) may still run
    #: before the daemon exits; what is left resumes at the next start (0: none).
    stop_upload_s: Annotated[float, Field(ge=0, le=300)] = FLEET_STOP_UPLOAD_S
    #: Wait between connection attempts (the first connection and after a loss).
    reconnect_wait_s: Annotated[float, Field(gt=0, le=300)] = 2.0
    #: Send the lap records (``laps.jsonl`` beside the recordings) to a key-value bucket.
    laps: bool = True
    laps_bucket: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")] = "wrtfd-laps"
    #: The pit-wall page's team panel: the best laps at the current track, this many drivers
    #: (0: no panel, the bucket is not read).
    team_rows: Annotated[int, Field(ge=0, le=100)] = 10
    #: After a failure to read the laps bucket, the panel tries again this much later.
    team_refresh_s: Annotated[float, Field(ge=0.5, le=3600)] = 5.0
    #: Put this rig's best lap per track, car and driver (a small WRTF lap file) in an object
    #: store bucket when it improves: the team's reference laps (``reference = "fleet:best"``).
    best_laps: bool = True
    best_laps_bucket: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")] = "wrtfd-best-laps"
    #: How often a rig with ``reference = "fleet:..."`` reads the lap records for a better lap.
    reference_poll_s: Annotated[float, Field(ge=0.2, le=3600)] = 5.0

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value)

    @field_validator("servers")
    @classmethod
    def _servers(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("give at least one server")
        return [check_url(v) for v in value]

    @property
    def server_list(self) -> tuple[str, ...]:
        """Every server URL, from ``url`` or ``servers``."""
        if self.servers is not None:
            return tuple(u for v in self.servers for u in v.split(","))
        return tuple((self.url or "").split(","))

    @model_validator(mode="after")
    def _credentials(self) -> FleetConfig:
        if (self.url is None) == (self.servers is None):
            raise ValueError(
                'give the server(s): url = "nats://HOST:PORT" or servers = [...], one of the two'
            )
        given = [
            name
            for name, present in (
                ("token", self.token is not None),
                ("user", self.user is not None),
                ("creds", self.creds is not None),
            )
            if present
        ]
        if len(given) > 1:
            raise ValueError(f"give one way to log in, not {' and '.join(given)}")
        if (self.user is None) != (self.password is None):
            raise ValueError("user and password go together")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        return self


@dataclass(frozen=True, slots=True)
class ConnectOptions:
    """How to reach and log in to the server: what ``nats.connect`` needs, nothing else."""

    servers: tuple[str, ...]
    token: str | None = None
    user: str | None = None
    password: str | None = None
    creds: Path | None = None
    tls: ssl.SSLContext | None = None
    connect_timeout_s: float = 5.0
    reconnect_wait_s: float = 2.0

    @property
    def shown(self) -> str:
        """The server list as shown in logs and status (never a secret)."""
        return ",".join(self.servers)


@dataclass(frozen=True, slots=True)
class FleetSettings:
    """The fleet publisher's resolved settings (see :class:`FleetConfig` for each)."""

    connect: ConnectOptions
    rig: str
    live_hz: float
    status_interval_s: float
    upload: bool
    bucket: str
    upload_existing: bool
    delete_after_upload: bool
    verify: str
    chunk_bytes: int
    upload_rate_bytes_s: int | None
    queue_dir: Path
    stop_upload_s: float = FLEET_STOP_UPLOAD_S
    replicas: int = 1
    laps: bool = True
    laps_bucket: str = "wrtfd-laps"
    team_rows: int = 10
    team_refresh_s: float = 5.0
    best_laps: bool = True
    best_laps_bucket: str = "wrtfd-best-laps"
    reference_poll_s: float = 5.0


def tls_context(ca: Path | None, cert: Path | None, key: Path | None) -> ssl.SSLContext:
    """A client TLS context; raises ConfigError naming the file that cannot be used."""
    try:
        context = ssl.create_default_context(cafile=str(ca) if ca is not None else None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"tls_ca: cannot use {ca}: {_ssl_reason(exc)}") from None
    if cert is not None and key is not None:
        try:
            context.load_cert_chain(str(cert), str(key))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"tls_cert/tls_key: cannot use {cert} with {key}: {_ssl_reason(exc)}") from None
    return context


def _ssl_reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(getattr(exc, "reason", None) or exc)


def fleet_settings(
    cfg: FleetConfig,
    *,
    resolve: Callable[[Path], Path],
    output_dir: Path,
    where: str = "fleet",
) -> FleetSettings:
    """Resolve ``cfg``: ``resolve`` makes a config-relative path absolute; raises ConfigError."""
    creds = None if cfg.creds is None else resolve(cfg.creds)
    if creds is not None and not creds.is_file():
        raise ConfigError(f"{where}.creds: no such file: {creds}")
    tls = None
    needs_tls = any(u.startswith("tls://") for u in cfg.server_list)
    if needs_tls or cfg.tls_ca is not None or cfg.tls_cert is not None:
        paths = [None if p is None else resolve(p) for p in (cfg.tls_ca, cfg.tls_cert, cfg.tls_key)]
        for name, p in zip(("tls_ca", "tls_cert", "tls_key"), paths, strict=True):
            if p is not None and not p.is_file():
                raise ConfigError(f"{where}.{name}: no such file: {p}")
        try:
            tls = tls_context(*paths)
        except ConfigError as exc:
            raise ConfigError(f"{where}.{exc}") from None
    queue_dir = output_dir / ".fleet" if cfg.queue_dir is None else output_dir / cfg.queue_dir
    connect = ConnectOptions(
        servers=cfg.server_list,
        token=None if cfg.token is None else cfg.token.get_secret_value(),
        user=cfg.user,
        password=None if cfg.password is None else cfg.password.get_secret_value(),
        creds=creds,
        tls=tls,
        connect_timeout_s=cfg.connect_timeout_s,
        reconnect_wait_s=cfg.reconnect_wait_s,
    )
    rig = cfg.rig if cfg.rig is not None else default_rig()
    if not _RIG_RE.fullmatch(rig):
        raise ConfigError(f"{where}.rig: {rig!r} is not a usable rig name (letters, digits, _ and -)")
    return FleetSettings(
        connect=connect,
        rig=rig,
        live_hz=cfg.live_hz,
        status_interval_s=cfg.status_interval_s,
        upload=cfg.upload,
        bucket=cfg.bucket,
        upload_existing=cfg.upload_existing,
        delete_after_upload=cfg.delete_after_upload,
        verify=cfg.verify,
        chunk_bytes=cfg.chunk_bytes,
        upload_rate_bytes_s=cfg.upload_rate_bytes_s,
        queue_dir=queue_dir,
        stop_upload_s=cfg.stop_upload_s,
        replicas=cfg.replicas,
        laps=cfg.laps,
        laps_bucket=cfg.laps_bucket,
        team_rows=cfg.team_rows,
        team_refresh_s=cfg.team_refresh_s,
        best_laps=cfg.best_laps,
        best_laps_bucket=cfg.best_laps_bucket,
        reference_poll_s=cfg.reference_poll_s,
    )
