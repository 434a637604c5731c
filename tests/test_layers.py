"""The layering rules import-linter cannot state (pyproject's contracts hold the others).

- no import cycle between any two modules of the package (import-linter's ``acyclic_siblings``
  only sees cycles between subpackages);
- the CLI imports the daemon (and anyio, pydantic) only inside the command that needs it;
- the offline commands, run as real processes, load neither anyio nor pydantic.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from tests.format.samples import write_car_file

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("anyio", "pydantic")


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for a, b in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")]:
        graph.add_import(importer=a, imported=b)
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_no_import_cycles_between_modules() -> None:
    """Function-level imports count too: a lazy import does not make a cycle acceptable
    (``if TYPE_CHECKING:`` imports never run, so they do not)."""
    graph = grimp.build_graph("wrtfd", cache_dir=None, exclude_type_checking_imports=True)
    assert len(graph.modules) > 100
    assert _cycles(graph) == []


def _top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in tree.body:  # module level only; TYPE_CHECKING blocks are never executed
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted((REPO / "wrtfd" / "cli").glob("*.py")), ids=lambda p: p.name)
def test_cli_imports_the_daemon_lazily(path: Path) -> None:
    heavy = {
        name
        for name in _top_level_imports(path)
        if name.split(".")[0] in HEAVY or name.startswith("wrtfd.daemon")
    }
    assert heavy == set(), f"{path.name} imports {sorted(heavy)} at module level"


def _loaded_heavy(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``python -X importtime -m wrtfd ARGS``; which of anyio/pydantic did it import?"""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("WRTFD_DEBUG", None)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "wrtfd", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    return proc, {name for name in imported if name.split(".")[0] in HEAVY}


@pytest.mark.parametrize(
    "args",
    [["info", "run.wrtf"], ["info", "--json", "run.wrtf"], ["validate", "run.wrtf"], ["dump", "run.wrtf"]],
    ids=" ".join,
)
def test_offline_commands_load_neither_anyio_nor_pydantic(tmp_path: Path, args: list[str]) -> None:
    write_car_file(tmp_path / "run.wrtf")
    proc, heavy = _loaded_heavy(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout  # the command did its work
    assert heavy == set()


def test_the_importtime_check_sees_anyio_when_it_is_loaded(tmp_path: Path) -> None:
    """The check above could pass by not seeing anything: ``config show`` does load pydantic."""
    proc, heavy = _loaded_heavy(["config", "show"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pydantic" in heavy


def test_import_wrtfd_is_cheap() -> None:
    code = f"import sys, wrtfd; print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_importing_a_capture_loads_neither_anyio_nor_pydantic(shared_data: Path, tmp_path: Path) -> None:
    """``wrtfd import capture.pcapng`` works on a core install: without ``--config`` the built-in
    default's routing comes from the decoder registry, not from the daemon's config models."""
    from tests.importers.test_pcap_import import paced_forza, write_capture

    write_capture(tmp_path / "rig.pcapng", [(5301, paced_forza(shared_data, 120), 60.0)])
    proc, heavy = _loaded_heavy(["import", "rig.pcapng", "-o", "out"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list((tmp_path / "out").glob("*.wrtf"))  # the command did its work
    assert heavy == set()
