"""Which requests come from the server's own page: a web page elsewhere can make the browser
send a request here (a cross-origin POST), or reach this port through a name of its own
(DNS rebinding); both are refused, as local notebook servers refuse them.

A request is the server's own when its Host header names the server (localhost, 127.0.0.1,
[::1] or the address given with --host, with the server's port) and its Origin, where the
browser sends one, is that same host. A server listening on every address (0.0.0.0, ::)
takes any Host, but still only an Origin that matches it.
"""

from __future__ import annotations

from dataclasses import dataclass

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
WILDCARDS = ("", "0.0.0.0", "::", "[::]")


def host_name(host: str) -> str:
    """An address as a Host header writes it (an IPv6 address in brackets), lower case."""
    host = host.strip().lower()
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host


@dataclass(frozen=True)
class HostCheck:
    """The Host and Origin headers a server listening on `given` (the --host value) at
    `port` accepts."""

    given: str
    port: int

    @property
    def any_host(self) -> bool:
        return host_name(self.given) in WILDCARDS

    @property
    def hosts(self) -> frozenset[str]:
        names = {*LOOPBACK_NAMES, host_name(self.given)}
        allowed = {f"{name}:{self.port}" for name in names}
        if self.port == 80:  # a browser leaves the default port out
            allowed |= names
        return frozenset(allowed)

    def refusal(self, host: str | None, origin: str | None) -> str | None:
        """Why a request with these headers is refused (one line), or None to serve it. A
        request without a Host header (HTTP/1.0, not a browser) is served."""
        host = None if host is None else host.strip().lower()
        if host is not None and not self.any_host and host not in self.hosts:
            return f"Host {host!r} is not this server's; open it as http://127.0.0.1:{self.port}/"
        if origin is None:
            return None
        origin = origin.strip().lower()
        own = {f"http://{name}" for name in self.hosts} if not self.any_host else set()
        if host is not None:
            own.add(f"http://{host}")
        if origin not in own:
            return f"cross-origin request from {origin!r} refused"
        return None
