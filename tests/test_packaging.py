"""What each install brings: the core (``pip install wrtfd``) reads, checks and dumps files without
the daemon's libraries; ``wrtfd[daemon]`` runs the daemon; a command whose extra is missing says
which one in a single line.

The fresh-venv test builds the wheel once and installs it (and numpy, PyYAML, crc32c, then the
daemon extra) with the test venv's uv (pip without it) from its cache; it is marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

from tests.e2e.test_daemon_harness import Daemon, free_port, udp_source
from tests.format.samples import write_car_file

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())

#: Import name -> distribution name, for the third-party imports of the package.
DISTRIBUTION = {
    "numpy": "numpy",
    "yaml": "PyYAML",
    "crc32c": "crc32c",
    "dpkt": "dpkt",  # the core's pcap/pcapng reader and the daemon's raw tap
    "Crypto": "pycryptodome",
    "hypercorn": "hypercorn",
    "starlette": "starlette",
    "rich": "rich",
    "nats": "nats-py",
    "anyio": "anyio",
    "pydantic": "pydantic",
    "serial": "pyserial-asyncio",  # pyserial comes with it
    "serial_asyncio": "pyserial-asyncio",
    "cantools": "cantools",
    "pynmeagps": "pynmeagps",
    "pyubx2": "pyubx2",
    "pyproj": "pyproj",
    "pyarrow": "pyarrow",
    "matplotlib": "matplotlib",
    "pandas": "pandas",
}


def _names(requirements: list[str]) -> set[str]:
    out = set()
    for req in requirements:
        name = req.split(";")[0].split("[")[0]
        for sep in "<>=!~ ":
            name = name.split(sep)[0]
        out.add(name.strip())
    return out


def _extra(name: str) -> set[str]:
    """The distributions of an extra, with those of the extras it names (``wrtfd[gnss]``)."""
    out: set[str] = set()
    for req in PYPROJECT["project"]["optional-dependencies"][name]:
        if req.startswith("wrtfd["):
            for inner in req[len("wrtfd[") : req.index("]")].split(","):
                out |= _extra(inner.strip())
        else:
            out |= _names([req])
    return out


CORE = _names(PYPROJECT["project"]["dependencies"])


def _third_party(graph: grimp.ImportGraph, package: str) -> set[str]:
    """Distributions imported (directly or not) by ``package``; stdlib left out."""
    roots = {m.split(".")[0] for m in graph.find_upstream_modules(package)} | {package.split(".")[0]}
    roots |= {m.split(".")[0] for m in graph.find_modules_directly_imported_by(package)}
    external = {r for r in roots if r != "wrtfd" and r not in sys.stdlib_module_names}
    unknown = external - set(DISTRIBUTION)
    assert unknown == set(), f"{package} imports {sorted(unknown)}: add it to DISTRIBUTION and pyproject"
    return {DISTRIBUTION[r] for r in external}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        "wrtfd", include_external_packages=True, cache_dir=None, exclude_type_checking_imports=True
    )


def test_the_core_is_light() -> None:
    # dpkt: pcap/pcapng import is an offline tool of the core install (pure Python, small);
    # pycryptodome: the GT7 decoder (decoders are core: captures are decoded offline too).
    assert {"numpy", "PyYAML", "crc32c", "dpkt", "pycryptodome"} == CORE
    assert {"anyio", "pydantic", "pyserial-asyncio", "cantools", "pynmeagps"} <= _extra("daemon")


@pytest.mark.parametrize(
    ("package", "extras"),
    [
        ("wrtfd.format", ()),
        ("wrtfd.scheduler", ()),
        ("wrtfd.recorder.recorder", ()),
        ("wrtfd.importers", ()),
        ("wrtfd.tracks.laps", ()),
        ("wrtfd.cli.info", ()),
        ("wrtfd.cli.validate", ()),
        ("wrtfd.cli.dump", ()),
        ("wrtfd.cli.simulate", ("gnss",)),  # the GNSS receivers (--protocol ubx|nmea --pty)
        ("wrtfd.daemon", ("daemon",)),
        ("wrtfd.cli.run", ("daemon", "fleet")),  # [fleet] is optional: its extra when configured
        ("wrtfd.decoders.can_dbc", ("can",)),
        ("wrtfd.format.export", ("parquet",)),
        ("wrtfd.tracks.render", ("plot",)),
        ("wrtfd.format.columns", ("pandas",)),
    ],
)
def test_each_part_needs_only_its_extras(
    graph: grimp.ImportGraph, package: str, extras: tuple[str, ...]
) -> None:
    allowed = set(CORE)
    for extra in extras:
        allowed |= _extra(extra)
    assert _third_party(graph, package) - allowed == set()


def test_all_is_every_extra_and_test_has_all() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    named = {e for e in extras if e not in ("all", "test")}
    assert extras["all"] == [f"wrtfd[{','.join(sorted(named, key=list(extras).index))}]"]
    assert "wrtfd[all]" in extras["test"]


def _run_without(modules: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``wrtfd ARGS`` in a process where importing any of ``modules`` fails, as if not installed."""
    code = (
        "import sys\n"
        f"for name in {modules!r}:\n"
        "    sys.modules[name] = None\n"
        "from wrtfd.cli.main import main\n"
        f"sys.exit(main({list(args)!r}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("WRTFD_DEBUG", None)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


DAEMON_MISSING = (
    "wrtfd: error: the recording daemon (wrtfd run, wrtfd config) needs anyio and pydantic:"
    " install wrtfd[daemon]\n"
)


@pytest.mark.parametrize("args", [["run"], ["config", "show"]], ids=" ".join)
def test_daemon_commands_without_the_extra_say_so_in_one_line(args: list[str]) -> None:
    proc = _run_without(["anyio", "pydantic"], *args)
    assert proc.returncode == 2
    assert proc.stderr == DAEMON_MISSING


def test_dbc_decoding_without_cantools_names_the_can_extra(tmp_path: Path) -> None:
    code = (
        "import sys\nsys.modules['cantools'] = None\n"
        "from wrtfd.errors import MissingDependencyError\n"
        "import wrtfd.decoders.candump\n"  # CanFrame and the log parser need no cantools
        "from wrtfd.decoders.can_dbc import DbcChannelDecoder\n"
        "try:\n    DbcChannelDecoder(dbc='car.dbc')\n"
        "except MissingDependencyError as exc:\n    print(exc.extra, exc)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout == ("can CAN decoding with a DBC file needs cantools: install wrtfd[can]\n")


def _installer() -> list[str] | None:
    """``uv pip`` from the test venv when it has uv (the README's install puts it there: the
    same packages in seconds instead of a minute), else None: the venv's pip."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    return [uv, "pip"] if uv else None


def _run_quiet(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)


def _build_wheel(src: Path, dist: Path) -> Path:
    uv = _installer()
    if uv is not None:
        _run_quiet([uv[0], "build", "-q", "--wheel", "--out-dir", str(dist), str(src)])
    else:
        _run_quiet([sys.executable, "-m", "pip", "-q", "--disable-pip-version-check", "wheel", "--no-deps",
                    "-w", str(dist), str(src)])  # fmt: skip
    (wheel,) = dist.glob("wrtfd-*.whl")
    return wheel


def _install(python: str, requirement: str) -> None:
    """Into the venv of ``python``, with the test venv's installer (its cache and index)."""
    uv = _installer()
    if uv is not None:
        _run_quiet([*uv, "install", "-q", "--python", python, requirement])
    else:
        _run_quiet([sys.executable, "-m", "pip", "-q", "--disable-pip-version-check", "--python", python,
                    "install", requirement])  # fmt: skip


@pytest.mark.slow
def test_fresh_core_install_reads_files_and_the_daemon_extra_runs_the_daemon(tmp_path: Path) -> None:
    # Build from a copy, so the build leaves nothing in the work tree.
    src = tmp_path / "src"
    shutil.copytree(REPO / "wrtfd", src / "wrtfd", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    wheel = _build_wheel(src, tmp_path / "dist")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    _install(python, str(wheel))

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WRTFD_DEBUG")}
    work = tmp_path / "work"  # not the repo: the installed package must be the one imported
    work.mkdir()
    write_car_file(work / "run.wrtf")

    def wrtfd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(venv / "bin" / "wrtfd"), *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,  # the service install compiles the venv
        )

    for module in ("anyio", "pydantic", "cantools", "serial_asyncio", "pynmeagps"):
        probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=60)
        assert probe.returncode != 0, f"the core install brought {module}"
    info = wrtfd("info", "--json", "run.wrtf")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["frames"] == 10
    valid = wrtfd("validate", "run.wrtf")
    assert valid.returncode == 0, valid.stdout + valid.stderr
    dump = wrtfd("dump", "run.wrtf")
    assert dump.returncode == 0, dump.stderr
    assert len(dump.stdout.splitlines()) == 2 + 2 * 5  # a session line and 5 frames, twice
    run = wrtfd("run")
    assert (run.returncode, run.stderr) == (2, DAEMON_MISSING)
    write_forza_capture(work / "forza.pcapng")  # issue 23 item 12: import in the core install
    imported = wrtfd("import", "forza.pcapng", "-o", "forza.wrtf")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(wrtfd("info", "--json", "forza.wrtf").stdout)["frames"] > 60

    _install(python, f"{wheel}[daemon]")
    status_port = free_port()
    config = (
        udp_source("forza", "forza", free_port(socket.SOCK_DGRAM))
        + f'[recorder]\noutput_dir = "{tmp_path / "rec"}"\n'
        + f"[status]\nport = {status_port}\n"
    )
    daemon = Daemon(work, config, status_port=status_port, env=env, python=python).start()
    try:
        status = daemon.wait_ready()
        assert status["sources"]["forza"]["state"] == "listening"
        daemon.signal(signal.SIGTERM)
        assert daemon.wait_exit() == 0, daemon.stderr
    finally:
        daemon.stop()

    # The service cannot write bytecode into its venv (ProtectSystem=strict): the install compiles it.
    site = Path(in_venv(python, "sysconfig", "sysconfig.get_paths()['purelib']"))
    for cache in site.rglob("__pycache__"):  # as uv leaves a venv (the runs above wrote some)
        shutil.rmtree(cache)
    app = site / "wrtfd" / "daemon" / "app.py"
    (site / "legacy_data").mkdir()  # a package's test data in Python 2: never compiles
    (site / "legacy_data" / "old.py").write_text('print "not Python 3"\n')
    compiled = Path(in_venv(python, "importlib.util", f"importlib.util.cache_from_source({str(app)!r})"))
    root = tmp_path / "root"
    root.mkdir()
    dry = wrtfd("service", "install", "--root", str(root), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    compile_line = f"would run {venv / 'bin' / 'python'} -m compileall -q -j 0 {site} ("
    assert any(line.startswith(compile_line) for line in dry.stdout.splitlines()), dry.stdout
    assert not compiled.exists()
    if any(shutil.which(t) is None for t in ("systemctl", "systemd-sysusers")):
        return  # the rest installs into a root with the systemd tools (CI installs them)
    installed = wrtfd("service", "install", "--root", str(root))
    assert installed.returncode == 0, installed.stderr
    assert any(
        line.startswith(compile_line.replace("would run", "ran", 1)) for line in installed.stdout.splitlines()
    )
    assert compiled.stat().st_mtime >= app.stat().st_mtime
    assert any(ln.startswith("bytecode: 1 file(s) of ") for ln in installed.stdout.splitlines()), (
        installed.stdout
    )
    again = wrtfd("service", "install", "--root", str(root))
    assert f"unchanged: bytecode of {site}: every module compiled" in again.stdout.splitlines(), again.stdout


def in_venv(python: str, module: str, expression: str) -> str:
    """``expression`` (after ``import module``) as that interpreter prints it."""
    return subprocess.check_output([python, "-c", f"import {module}; print({expression})"], text=True).strip()


#: Libraries no extra of the core install brings (the offline tools must work without any).
OPTIONAL = ["cantools", "can", "anyio", "pydantic", "pyarrow", "pandas", "asammdf", "matplotlib", "mcap"]
OPTIONAL += ["rich", "pynmeagps", "serial_asyncio", "hypercorn", "starlette", "nats", "pyproj", "pyubx2"]


def write_forza_capture(cap: Path) -> None:
    """1.5 s of simulated Forza to its usual port, as a pcapng capture."""
    from tests.daemon.test_lazy_imports import forza_datagrams
    from wrtfd.pcap import PcapngWriter

    with cap.open("wb") as f:
        w = PcapngWriter(f)
        iface = w.add_udp_interface("eth0")
        for i, d in enumerate(forza_datagrams(90)):
            w.write_datagram(
                iface, 10**18 + i * 16_666_667, ("192.168.1.20", 50000), ("192.168.1.5", 5301), d
            )


def test_import_of_a_capture_needs_no_extra(tmp_path: Path) -> None:
    """Issue 23 item 12: ``wrtfd import forza.pcapng`` in the core install (detection used to
    import the CAN importer, hence cantools)."""
    cap = tmp_path / "forza.pcapng"
    write_forza_capture(cap)
    proc = _run_without(OPTIONAL, "import", str(cap), "-o", str(tmp_path / "out.wrtf"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.wrtf").stat().st_size > 10_000
