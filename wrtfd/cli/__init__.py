"""The ``wrtfd`` command line: one module per subcommand, registered in :mod:`wrtfd.cli.main`."""

__all__: list[str] = []
