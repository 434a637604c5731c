"""The service's system account, declared for ``systemd-sysusers``.

Why sysusers.d rather than ``useradd``: the declaration is a file (the same one creates the
account on an image built with ``--root``, or again after a factory reset), applying it is
idempotent by design (an existing user or membership is left alone), ``systemd-sysusers
--root=DIR`` writes into ``DIR/etc/passwd`` and ``DIR/etc/group`` without touching the running
system, and it ships with systemd, which the service needs anyway.

The unit also sets ``SupplementaryGroups=dialout``; the membership written here makes the same
true outside the unit (``sudo -u wrtfd wrtfd run`` can open a serial adapter).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["GROUP_SERIAL", "SYSUSERS_NAME", "SYSUSERS_TEXT", "USER", "AccountState", "account_state"]

USER = "wrtfd"
#: Debian's and Fedora's group for /dev/ttyUSB*, /dev/ttyACM*, /dev/ttyS*.
GROUP_SERIAL = "dialout"
#: The file in ``/etc/sysusers.d``; ``systemd-sysusers NAME`` applies just this one.
SYSUSERS_NAME = "wrtfd.conf"
SYSUSERS_TEXT = f"""\
# wrtfd's system account (written by `wrtfd service install`; applied by systemd-sysusers).
# Type Name  ID  GECOS                         Home directory   Shell
u      {USER} -   "wrtfd telemetry recorder"    /var/lib/wrtfd   /usr/sbin/nologin
# Serial GPS/CAN/OBD adapters belong to {GROUP_SERIAL}.
m      {USER} {GROUP_SERIAL}
"""

#: passwd and group files are small; anything bigger is not one (bounded input).
_MAX_TABLE_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class AccountState:
    user: bool
    group: bool
    in_serial_group: bool

    @property
    def complete(self) -> bool:
        return self.user and self.group and self.in_serial_group


def _table(path: Path) -> list[list[str]]:
    try:
        with path.open("rb") as f:
            raw = f.read(_MAX_TABLE_BYTES)
    except FileNotFoundError:
        return []
    lines = raw.decode("utf-8", "replace").splitlines()
    return [ln.split(":") for ln in lines if ln and not ln.startswith("#")]


def account_state(root: Path) -> AccountState:
    """Whether ``root``'s ``/etc/passwd`` and ``/etc/group`` already have what the
    declaration asks for (local files only: a service account is never in LDAP)."""
    users = {row[0] for row in _table(root / "etc" / "passwd")}
    groups = {row[0]: row[3].split(",") if len(row) > 3 else [] for row in _table(root / "etc" / "group")}
    return AccountState(
        user=USER in users,
        group=USER in groups,
        in_serial_group=USER in groups.get(GROUP_SERIAL, []),
    )
