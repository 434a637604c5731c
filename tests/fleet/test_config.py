"""``[fleet]``: validation, resolution into settings, secrets, and TLS against a real server."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fleet.nats_server import NatsServer
from wrtfd.daemon.config import parse_config
from wrtfd.errors import ConfigError
from wrtfd.fleet.client import FleetError, connect
from wrtfd.fleet.config import ConnectOptions, default_rig, fleet_settings, tls_context

SOURCE = {"sources": [{"kind": "udp", "protocol": "forza", "port": 5301}]}


def _cfg(**fleet: object):  # type: ignore[no-untyped-def]
    return parse_config({**SOURCE, "fleet": {"url": "nats://pit-wall:4222", **fleet}}, "t.toml").fleet


def test_defaults_and_resolution(tmp_path: Path) -> None:
    cfg = _cfg(token="secret")
    s = fleet_settings(cfg, resolve=lambda p: tmp_path / p, output_dir=tmp_path / "rec")
    assert s.connect.servers == ("nats://pit-wall:4222",) and s.connect.token == "secret"
    assert (s.live_hz, s.status_interval_s, s.bucket, s.verify) == (10.0, 2.0, "wrtfd", "content")
    assert s.queue_dir == tmp_path / "rec" / ".fleet"
    assert s.rig == default_rig() and s.connect.tls is None


@pytest.mark.parametrize(
    ("fleet", "message"),
    [
        ({"url": "http://x:1"}, "expected nats://HOST:PORT"),
        ({"url": "nats://u:p@x:4222"}, "credentials"),
        ({"token": "a", "user": "u", "password": "p"}, "one way to log in"),
        ({"user": "u"}, "user and password go together"),
        ({"tls_cert": "c.pem"}, "tls_cert and tls_key go together"),
        ({"rig": "has.dot"}, "fleet.rig"),
        ({"live_hz": -1}, "fleet.live_hz"),
        ({"bogus": 1}, "unknown key"),
    ],
)
def test_bad_sections_name_the_key(fleet: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({**SOURCE, "fleet": {"url": "nats://x:4222", **fleet}}, "t.toml")


def test_missing_files_are_config_errors_before_anything_starts(tmp_path: Path) -> None:
    for fleet, key in (({"creds": "nope.creds"}, "creds"), ({"tls_ca": "ca.pem"}, "tls_ca")):
        with pytest.raises(ConfigError, match=f"fleet.{key}: no such file"):
            fleet_settings(_cfg(**fleet), resolve=lambda p: tmp_path / p, output_dir=tmp_path)
    (tmp_path / "ca.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match="tls_ca: cannot use"):
        fleet_settings(_cfg(tls_ca="ca.pem"), resolve=lambda p: tmp_path / p, output_dir=tmp_path)


def test_config_show_never_prints_secrets(tmp_path: Path) -> None:
    from wrtfd.daemon.toml_out import dumps

    config = parse_config(
        {**SOURCE, "fleet": {"url": "nats://x:4222", "user": "u", "password": "hunter2"}}, "t"
    )
    text = dumps(config.model_dump(mode="json", by_alias=True))
    assert "hunter2" not in text and 'password = "**********"' in text


def test_default_rig_is_a_subject_token() -> None:
    assert default_rig("pit-wall.local") == "pit-wall"
    assert default_rig("rig 3 (left)") == "rig-3-left"
    assert default_rig("...") == "rig"


def _make_certs(directory: Path) -> tuple[Path, Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    ca_key, ca, key, csr, cert = (
        directory / n for n in ("ca.key", "ca.pem", "srv.key", "srv.csr", "srv.pem")
    )
    ext = directory / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
        "-days",
        "2",
        "-subj",
        "/CN=test-ca",
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(csr),
        "-subj",
        "/CN=127.0.0.1",
    )
    run(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        str(cert),
        "-days",
        "2",
        "-extfile",
        str(ext),
    )
    return ca, cert, key


async def test_tls_with_the_teams_ca_connects_and_without_it_is_refused(tmp_path: Path) -> None:
    ca, cert, key = _make_certs(tmp_path)
    server = NatsServer(tmp_path / "nats", tls=(cert, key)).start()
    try:
        options = ConnectOptions(servers=(server.url,), token=server.token, tls=tls_context(ca, None, None))
        nc = await connect(options, name="tls test")
        assert nc.is_connected
        await nc.close()
        import ssl

        untrusting = ConnectOptions(
            servers=(server.url,), token=server.token, tls=ssl.create_default_context()
        )
        with pytest.raises(FleetError, match=r"TLS|certificate"):
            await connect(untrusting, name="tls test")
    finally:
        server.stop()


def test_service_install_carries_the_fleet_files_with_the_config(tmp_path: Path) -> None:
    from wrtfd.daemon.config import load_config
    from wrtfd.service.configfiles import relative_references

    (tmp_path / "tls").mkdir()
    config = tmp_path / "rig.toml"
    config.write_text(
        '[[sources]]\nkind = "udp"\nprotocol = "forza"\nport = 5301\n'
        '[fleet]\nurl = "tls://pit-wall:4222"\ncreds = "rig.creds"\ntls_ca = "tls/ca.pem"\n'
    )
    refs = {r.key: r for r in relative_references(load_config(config))}
    assert refs["fleet.creds"].path == tmp_path / "rig.creds"
    assert refs["fleet.tls_ca"].written == "tls/ca.pem"


def test_servers_list_and_replicas(tmp_path: Path) -> None:
    urls = ["nats://n1:4222", "nats://n2:4222", "tls://n3:4222"]
    cfg = parse_config({**SOURCE, "fleet": {"servers": urls, "replicas": 3}}, "t.toml").fleet
    assert cfg is not None
    s = fleet_settings(cfg, resolve=lambda p: tmp_path / p, output_dir=tmp_path)
    assert s.connect.servers == tuple(urls) and s.connect.tls is not None  # a tls:// node: TLS on
    cfg = parse_config({**SOURCE, "fleet": {"servers": urls[:2], "replicas": 3}}, "t.toml").fleet
    assert cfg is not None
    s = fleet_settings(cfg, resolve=lambda p: tmp_path / p, output_dir=tmp_path)
    assert s.connect.servers == tuple(urls[:2]) and s.replicas == 3
    # the single url keeps working, commas included
    assert _cfg().server_list == ("nats://pit-wall:4222",)
    assert _cfg(url="nats://a:1,nats://b:2").server_list == ("nats://a:1", "nats://b:2")


@pytest.mark.parametrize(
    ("fleet", "message"),
    [
        ({}, "url = "),
        ({"url": "nats://a:1", "servers": ["nats://b:1"]}, "one of the two"),
        ({"servers": []}, "at least one server"),
        ({"servers": ["http://b:1"]}, "expected nats://HOST:PORT"),
        ({"servers": ["nats://b:1"], "replicas": 7}, "fleet.replicas"),
    ],
)
def test_bad_server_lists_name_the_key(fleet: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({**SOURCE, "fleet": fleet}, "t.toml")
