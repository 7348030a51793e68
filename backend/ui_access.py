"""Who may open the page: localhost by default, an access token for any other interface.

    check_bind("127.0.0.1", None)        # fine: only this machine can connect
    check_bind("0.0.0.0", None)          # ConfigError: set RLWB_UI_TOKEN (or --token)
    token_matches(given, expected)        # constant-time comparison (hmac.compare_digest)

`rlwb ui` calls `check_bind` before starting Streamlit and hands the token to the page
through the environment (`TOKEN_ENV`, never the command line, which other users can read
in ``ps``); the page (`app.auth`) then asks for it before showing anything. The token is
never printed, logged or stored.

Not covered: TLS (put a reverse proxy with HTTPS in front when the page leaves a trusted
network; the token crosses the wire in clear otherwise), users and roles (one token, one
level of access), and Streamlit's own static and media endpoints (their names are random;
the page's content and every action go through the token check).
"""

from __future__ import annotations

import hmac
import ipaddress
import re

from core.errors import ConfigError

TOKEN_ENV = "RLWB_UI_TOKEN"
MIN_TOKEN_CHARS = 16
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve the page on `host` without protection.

    Raises:
        ConfigError: `host` is not a host name or IP address; a non-loopback `host` (e.g.
            0.0.0.0) without a token; a token shorter than `MIN_TOKEN_CHARS` or with
            whitespace or control characters.
    """
    bare = host.strip("[]")
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        if not _HOSTNAME.match(host):
            raise ConfigError(f"--host {host!r} is not a host name or IP address; use 127.0.0.1 (this machine "
                              "only, the default) or 0.0.0.0 with an access token") from None
    if token is not None and (len(token) < MIN_TOKEN_CHARS or not token.isprintable() or any(c.isspace() for c in token)):
        raise ConfigError(f"the access token must be at least {MIN_TOKEN_CHARS} printable characters without "
                          f"spaces; make one with `python -c 'import secrets; print(secrets.token_urlsafe(24))'`")
    if not is_loopback(host) and not token:
        raise ConfigError(f"--host {host} lets other machines open the page; set an access token first: "
                          f"export {TOKEN_ENV}=$(python -c 'import secrets; print(secrets.token_urlsafe(24))') "
                          "(or pass --token), or keep the default --host 127.0.0.1")


def token_matches(given: object, expected: str) -> bool:
    """Constant-time check of a submitted token; anything that is not a str is wrong."""
    if not isinstance(given, str) or not expected:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))
