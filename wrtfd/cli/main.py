"""Entry point of the ``wrtfd`` command.

Each subcommand lives in its own module with ``register(subparsers)``, which adds its parser and
sets ``func`` (a callable taking the parsed namespace and returning the exit code). Modules keep
heavy imports (anyio, pydantic, matplotlib, pyarrow) inside ``func``, and a command line naming a
command imports that command's module only (:data:`COMMANDS`), so that offline tools such as
``wrtfd validate`` start fast and the daemon loads nothing of the other commands; help without a
command, or an unknown one, loads them all.

Every :class:`~wrtfd.errors.WrtfdError` and :class:`OSError` becomes one line on stderr and exit
code 2; nothing prints a traceback unless ``WRTFD_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from wrtfd import __version__
from wrtfd.errors import WrtfdError

__all__ = [
    "COMMANDS",
    "COMMAND_MODULES",
    "build_parser",
    "error_line",
    "main",
]

#: Subcommand modules in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "wrtfd.cli.run",
    "wrtfd.cli.config_cmd",
    "wrtfd.cli.status_cmd",
    "wrtfd.cli.mark_cmd",
    "wrtfd.cli.fleet_cmd",
    "wrtfd.cli.service_cmd",
    "wrtfd.cli.info",
    "wrtfd.cli.validate",
    "wrtfd.cli.dump",
    "wrtfd.cli.write",
    "wrtfd.cli.repair",
    "wrtfd.cli.export",
    "wrtfd.cli.dataset_cmd",
    "wrtfd.cli.import_cmd",
    "wrtfd.cli.zddsrec_cmd",
    "wrtfd.cli.carla_cmd",
    "wrtfd.cli.track_cmd",
    "wrtfd.cli.circuit_cmd",
    "wrtfd.cli.laps",
    "wrtfd.cli.simulate",
    "wrtfd.cli.plot",
    "wrtfd.cli.compare",
)


#: Command name -> the module that registers it (tests/cli/test_main.py checks it against them).
COMMANDS: dict[str, str] = {
    "run": "wrtfd.cli.run",
    "config": "wrtfd.cli.config_cmd",
    "status": "wrtfd.cli.status_cmd",
    "mark": "wrtfd.cli.mark_cmd",
    "watch": "wrtfd.cli.fleet_cmd",
    "collect": "wrtfd.cli.fleet_cmd",
    "fleet": "wrtfd.cli.fleet_cmd",
    "service": "wrtfd.cli.service_cmd",
    "info": "wrtfd.cli.info",
    "validate": "wrtfd.cli.validate",
    "dump": "wrtfd.cli.dump",
    "write": "wrtfd.cli.write",
    "repair": "wrtfd.cli.repair",
    "export": "wrtfd.cli.export",
    "dataset": "wrtfd.cli.dataset_cmd",
    "import": "wrtfd.cli.import_cmd",
    "zddsrec": "wrtfd.cli.zddsrec_cmd",
    "carla": "wrtfd.cli.carla_cmd",
    "track": "wrtfd.cli.track_cmd",
    "circuit": "wrtfd.cli.circuit_cmd",
    "laps": "wrtfd.cli.laps",
    "simulate": "wrtfd.cli.simulate",
    "plot": "wrtfd.cli.plot",
    "compare": "wrtfd.cli.compare",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` alone when it is a known one."""
    modules = (COMMANDS[command],) if command in COMMANDS else COMMAND_MODULES
    parser = argparse.ArgumentParser(
        prog="wrtfd",
        description="Record racing telemetry into WRTF files, and inspect, repair and export them.",
    )
    parser.add_argument("--version", action="version", version=f"wrtfd {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        module = importlib.import_module(name)
        module.register(subparsers)
    return parser


def error_line(message: str) -> None:
    """Print one error line the way every command does."""
    sys.stderr.write(f"wrtfd: error: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words and not words[0].startswith("-") else None)
    args = parser.parse_args(words)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(func(args))
    except WrtfdError as exc:
        if os.environ.get("WRTFD_DEBUG"):
            raise
        error_line(str(exc))
        return 2
    except OSError as exc:
        if os.environ.get("WRTFD_DEBUG"):
            raise
        if isinstance(exc, BrokenPipeError):
            # The reader of our stdout went away (``wrtfd dump f | head``): not an error.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 0
        where = f": {exc.filename}" if exc.filename else ""
        if exc.filename2:
            # two paths (rename, symlink, link): name both, as Python's own message does
            where += f" -> {exc.filename2}"
        error_line(f"{exc.strerror or exc}{where}")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
