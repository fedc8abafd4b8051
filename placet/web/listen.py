"""Where `placet web` listens, and under which name: the listening socket, made before the
URL is printed, and the refusal to serve a non-loopback address without TLS (passkeys
need a secure context). `WebConfig` names the origin every check compares with."""

from __future__ import annotations

import errno
import ipaddress
import socket
from dataclasses import dataclass

from placet.errors import UsageError

__all__ = ["WebConfig", "bind_listener", "check_listen", "is_loopback"]


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen(host: str, *, tls: bool) -> None:
    """Refuse a listen address other than loopback without TLS: passkeys need a secure
    context, and the page must not cross a network in clear text.

    Raises:
        UsageError (``insecure_listen``).
    """
    if not tls and not is_loopback(host):
        raise UsageError(
            f"refusing to listen on {host} without TLS: placet web serves other addresses "
            "only over https (passkeys need a secure context); give --cert and --key, or "
            "listen on 127.0.0.1 (the default)",
            code="insecure_listen",
            details={"host": host},
        )


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host`:`port` (IPv6 for an address with a colon), made
    before `placet web` prints its URL and handed to uvicorn, so a port in use is told
    plainly and no other process can take the port between the check and the serving.

    Raises:
        UsageError (``port_in_use``): another process listens there; (``invalid_argument``)
            the address cannot be bound (not this machine's, or a port below 1024 without
            the right to it).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise UsageError(
                f"cannot serve placet web on {host}:{port}: another process is listening "
                "there (a `placet web` already running?); stop it, or choose another port "
                "with --port",
                code="port_in_use",
                details={"host": host, "port": port},
            ) from e
        raise UsageError(
            f"cannot serve placet web on {host}:{port}: {e.strerror or e}",
            details={"host": host, "port": port},
        ) from e
    sock.set_inheritable(False)
    return sock


@dataclass(frozen=True)
class WebConfig:
    """Where the page is served. `name` is the host name in its URLs and the passkeys'
    RP ID (``localhost`` on loopback; under TLS the name the certificate is for)."""

    host: str = "127.0.0.1"
    port: int = 8765
    tls: bool = False
    name: str = "localhost"

    @property
    def origin(self) -> str:
        scheme = "https" if self.tls else "http"
        default = 443 if self.tls else 80
        return f"{scheme}://{self.name}" + ("" if self.port == default else f":{self.port}")

    @property
    def authority(self) -> str:
        return self.origin.split("://", 1)[1]
