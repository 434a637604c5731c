"""The pit-wall page and the daemon's HTTP endpoints (``docs/web.md``).

* :mod:`.server`: hypercorn serving the app inside the daemon's task group, on a listening socket
  that bounds the number of connections;
* :mod:`.routes`: the Starlette app: ``/`` (the page), ``/static/*``, ``/status``, ``/metrics``,
  ``/healthz``, ``/api/events`` (Server-Sent Events), ``/api/mark``, ``/api/session``;
* :mod:`.access`: who may read and who may change what (loopback, token, CSRF, Host and Origin);
* :mod:`.live`: the observer of the recording that turns frames and events into page updates.
"""

__all__: list[str] = []
