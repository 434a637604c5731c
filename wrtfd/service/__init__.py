"""Installing wrtfd as a systemd service: ``wrtfd service install`` / ``uninstall``.

``install`` (the steps, in order), ``command`` (what ``ExecStart=`` runs), ``accounts`` (the
sysusers.d declaration), ``configfiles`` (files a config names), ``steps`` (doing or printing
each step). The unit files themselves ship in ``units/``; ``systemd/`` in the repository links
to them.
"""

__all__: list[str] = []
