"""Who may read the page and the API, and who may change things (mark, new session).

The rules (``docs/web.md`` explains the why):

* **Bound to loopback** (the default): anyone on this machine may read; a change needs the CSRF
  token (or the bearer token) so that a web page in the user's browser cannot make one.
* **Bound to another address** (``[status] host`` a LAN address or ``0.0.0.0``): a change needs the
  token, as ``Authorization: Bearer TOKEN`` (``wrtfd mark``) or the cookie the page gets from
  ``/?token=TOKEN`` (then the CSRF token too); reading needs it too unless ``public_read``.
  Requests from a loopback peer count as from this machine (``wrtfd status`` needs no token).
* **Every request**: the ``Host`` header must be an IP address, ``localhost`` or one of
  ``allowed_hosts``, which defeats DNS rebinding (a hostile site whose name points at us); a
  change with an ``Origin`` header must come from our own origin; there are no CORS headers, so
  other sites can neither read answers nor send the custom CSRF header.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from wrtfd.errors import ConfigError

__all__ = [
    "COOKIE",
    "CSRF_HEADER",
    "Access",
    "AccessPolicy",
    "is_loopback",
    "load_or_create_token",
    "resolve_token",
]

#: Where a generated token is kept, in the recordings' directory.
TOKEN_FILE = ".wrtfd-web-token"

COOKIE = "wrtfd_auth"
CSRF_HEADER = "x-wrtfd-csrf"
#: A token shorter than this is refused in the config (guessable).
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``; False for wildcards and other addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_or_create_token(path: Path) -> str:
    """The token kept in ``path`` (mode 0600), created with a random one if absent.

    :raises ConfigError: the file cannot be read or written, or holds no usable token.
    """
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the web token: {exc.strerror or exc}") from None
    if text:
        if len(text) < MIN_TOKEN_CHARS:
            raise ConfigError(f"{path}: the web token is shorter than {MIN_TOKEN_CHARS} characters")
        return text
    token = secrets.token_urlsafe(24)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(token + "\n")
    except FileExistsError:  # another process made it first: use theirs
        return load_or_create_token(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write the web token: {exc.strerror or exc}") from None
    return token


def resolve_token(
    configured: str | None, bind_host: str, output_dir: Path, *, create: bool = True
) -> str | None:
    """The token changes need: ``[web] token``, else (off loopback) the generated one kept in
    ``output_dir/.wrtfd-web-token`` (created when ``create``); None on loopback without one."""
    if configured:
        return configured
    if is_loopback(bind_host):
        return None
    path = output_dir / TOKEN_FILE
    if not create and not path.exists():
        return None
    return load_or_create_token(path)


@dataclass(frozen=True, slots=True)
class Access:
    read: bool
    write: bool
    #: Why writing is refused (for the 401/403 answer).
    reason: str = ""
    #: The caller authenticated with the token (bearer or cookie).
    authenticated: bool = False
    #: The caller may change things given the CSRF token: on loopback, a loopback peer of a LAN
    #: server, or authenticated (what the page's ``hello.can_write`` says).
    trusted: bool = False


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """The rules for one server (see the module docstring)."""

    bind_host: str
    token: str | None
    csrf: str
    public_read: bool = False
    allowed_hosts: frozenset[str] = frozenset()

    @property
    def lan(self) -> bool:
        return not is_loopback(self.bind_host)

    @classmethod
    def build(
        cls,
        bind_host: str,
        token: str | None,
        *,
        public_read: bool = False,
        allowed_hosts: Iterable[str] = (),
    ) -> AccessPolicy:
        if not is_loopback(bind_host) and not token:
            raise ConfigError(f"web: listening on {bind_host} needs a token")
        return cls(
            bind_host,
            token,
            secrets.token_urlsafe(24),
            public_read,
            frozenset(h.lower() for h in allowed_hosts),
        )

    def host_allowed(self, host_header: str | None) -> bool:
        """An IP literal, localhost or a configured name (any port): no DNS-rebound names."""
        if not host_header:
            return False
        try:  # "[" or "]" make urlsplit raise: a malformed header, refused as any bad name
            host = urlsplit("//" + host_header).hostname
        except ValueError:
            return False
        if host is None:
            return False
        if host == "localhost" or host in self.allowed_hosts:
            return True
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return False
        return True

    def token_matches(self, value: str | None) -> bool:
        return bool(self.token) and value is not None and _same(value, self.token or "")

    def check(
        self,
        *,
        peer: str | None,
        headers: Mapping[str, str],
        cookies: Mapping[str, str],
    ) -> Access:
        """What the request may do. ``headers`` lower-cased names."""
        auth = headers.get("authorization", "")
        bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        by_bearer = self.token_matches(bearer)
        by_cookie = self.token_matches(cookies.get(COOKIE))
        local = peer is not None and is_loopback(peer)
        authenticated = by_bearer or by_cookie
        trusted = not self.lan or local or authenticated
        read = trusted or self.public_read
        if not trusted:
            return Access(read, False, "a token is needed (Authorization: Bearer, or open /?token=...)")
        if by_bearer:
            return Access(read, True, authenticated=True, trusted=True)
        csrf = headers.get(CSRF_HEADER)
        if csrf is None or not _same(csrf, self.csrf):
            return Access(
                read, False, "missing or stale CSRF token (reload the page)", authenticated, trusted=True
            )
        return Access(read, True, authenticated=authenticated, trusted=True)

    def origin_allowed(self, origin: str | None, host_header: str | None) -> bool:
        """A change from a browser must come from our own origin (absent: not a browser)."""
        if origin is None:
            return True
        try:  # "http://[" makes urlsplit raise: not our origin
            parts = urlsplit(origin)
        except ValueError:
            return False
        return (
            parts.scheme == "http"
            and bool(host_header)
            and parts.netloc.lower() == (host_header or "").lower()
        )


def _same(value: str, secret: str) -> bool:
    """``value == secret`` in constant time, for any text a client sends: ``compare_digest`` takes
    only ASCII ``str`` (a TypeError otherwise), so both are compared as UTF-8 bytes (a lone
    surrogate from a percent-decoded query kept as itself)."""
    return hmac.compare_digest(
        value.encode("utf-8", "surrogatepass"), secret.encode("utf-8", "surrogatepass")
    )
