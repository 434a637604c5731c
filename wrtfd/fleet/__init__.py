"""A team's rigs in one place: live telemetry, status and recordings over NATS JetStream.

The rig side (:mod:`~wrtfd.fleet.publisher`) observes the recording and publishes; the pit-wall
side is ``wrtfd watch``, ``wrtfd fleet status`` and ``wrtfd collect``. The wire formats are in
:mod:`~wrtfd.fleet.encoding` and ``docs/fleet.md``. nats-py is an optional dependency (the
``fleet`` extra): only the modules that talk to a server import it, and only when they run.
"""

__all__: list[str] = []
