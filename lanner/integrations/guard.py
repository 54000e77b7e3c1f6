"""The guard between a user's bucket endpoint and the operator's network (SSRF).

A bucket endpoint is user input, so every connection Lanner makes for a storage integration must reach a public
address (or one in ``LANNER_BUCKET_ALLOWED_NETWORKS``): never loopback, private, link-local (the cloud metadata
service, 169.254.169.254), multicast or reserved.

Why a proxy: obstore (Rust reqwest) takes no custom resolver, and a check before the call would resolve the
name a second time at connect, so a DNS answer that changes between the two (rebinding) would get through. Every
store is built with ``proxy_url`` pointing at ``GuardProxy``, a small in-process HTTP proxy on 127.0.0.1: for
each connection it resolves the name once, checks every address, and connects to the address it checked (the
TLS session stays end to end through CONNECT, so certificates are verified against the real name). A redirect
the client followed would be a new connection through the same check.
"""

from __future__ import annotations

import ipaddress
import select
import socket
import socketserver
import threading
from collections import deque
from collections.abc import Callable
from urllib.parse import urlsplit

from lanner.errors import BadRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[str]]
IDLE_SECONDS = 60.0  # a tunnel with no bytes either way this long is closed
HEADER_LIMIT = 16384  # a proxy request's head larger than this is refused


class EndpointRefused(BadRequest):
    """The endpoint names an address the operator has not allowed (or cannot be resolved)."""

    code = "endpoint_refused"


def parse_networks(text: str) -> list[Network]:
    """``LANNER_BUCKET_ALLOWED_NETWORKS`` as networks (a bad entry fails loudly at start, not at first use)."""
    return [ipaddress.ip_network(part.strip(), strict=False) for part in text.split(",") if part.strip()]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the name resolves to (one lookup)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise EndpointRefused(f"the endpoint's host '{host}' cannot be resolved") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def check_address(address: str, allowed: list[Network]) -> None:
    """Refuse a non-public address unless an allowed network holds it."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    if any(ip in network for network in allowed):
        return
    if not ip.is_global or ip.is_multicast or ip.is_reserved or ip.is_link_local or ip.is_loopback:
        raise EndpointRefused(f"the endpoint resolves to {ip}, a private, loopback or link-local address; the "
                              "operator may allow its network with LANNER_BUCKET_ALLOWED_NETWORKS")


def resolve_checked(host: str, port: int, allowed: list[Network], resolver: Resolver) -> str:
    """Resolve ``host`` once; every answer must pass (a name with one private answer is refused). Returns the
    address to connect to."""
    addresses = resolver(host, port)
    if not addresses:
        raise EndpointRefused(f"the endpoint's host '{host}' has no address")
    for address in addresses:
        check_address(address, allowed)
    return addresses[0]


def check_endpoint(url: str, allowed: list[Network], resolver: Resolver = system_resolver) -> str:
    """Validate a user's endpoint URL up front, for a clear 400 at create time (the proxy checks every
    connection again later). Returns the URL without a trailing slash."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointRefused("the endpoint must be an http:// or https:// URL with a host")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise EndpointRefused("the endpoint must not carry credentials, a query or a fragment")
    resolve_checked(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80), allowed, resolver)
    return url.rstrip("/")


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        client: socket.socket = self.request
        client.settimeout(IDLE_SECONDS)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk or len(head) > HEADER_LIMIT:
                return
            head += chunk
        line, _, rest = head.partition(b"\r\n")
        try:
            method, target, version = line.decode("latin-1").split(" ", 2)
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                upstream_host, upstream_port, first = host.strip("[]"), int(port), b""
            else:  # absolute-form http://host:port/path: forwarded in origin form on a pinned connection
                parts = urlsplit(target)
                if parts.scheme != "http" or not parts.hostname:
                    raise EndpointRefused("only http:// requests and CONNECT tunnels are proxied")
                upstream_host, upstream_port = parts.hostname, parts.port or 80
                path = parts.path or "/"
                path += f"?{parts.query}" if parts.query else ""
                first = f"{method} {path} {version}\r\n".encode("latin-1") + rest
            address = resolve_checked(upstream_host, upstream_port, self.server.allowed, self.server.resolver)
        except (ValueError, EndpointRefused) as exc:
            self.server.refusals.append(str(exc))
            self.server.refused += 1
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                           b"Content-Length: %d\r\n\r\n%s" % (len(str(exc).encode()), str(exc).encode()))
            return
        try:
            upstream = socket.create_connection((address, upstream_port), timeout=self.server.connect_timeout)
        except OSError:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            return
        with upstream:
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                upstream.sendall(first)
            _pipe(client, upstream)


def _pipe(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes or both are idle for IDLE_SECONDS."""
    peers = {a: b, b: a}
    while True:
        ready, _, _ = select.select(list(peers), [], [], IDLE_SECONDS)
        if not ready:
            return
        for sock in ready:
            try:
                data = sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            peers[sock].sendall(data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, allowed: list[Network], resolver: Resolver, connect_timeout: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.allowed, self.resolver, self.connect_timeout = allowed, resolver, connect_timeout
        self.refusals: deque[str] = deque(maxlen=100)
        self.refused = 0


class GuardProxy:
    """One per process and settings (``integrations.stores.guard_for``); its thread is a daemon, so it never
    keeps a process alive."""

    def __init__(self, allowed: list[Network], *, resolver: Resolver = system_resolver,
                 connect_timeout: float = 5.0) -> None:
        self._server = _Server(allowed, resolver, connect_timeout)
        self._thread = threading.Thread(target=self._server.serve_forever, name="bucket-guard", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def refusals(self) -> deque[str]:
        """The last refusals, newest last (the error a client saw only says 403, or that its tunnel failed)."""
        return self._server.refusals

    @property
    def refused(self) -> int:
        """How many connections were refused so far: a caller compares it before and after its request."""
        return self._server.refused

    @property
    def resolver(self) -> Resolver:
        return self._server.resolver

    def set_resolver(self, resolver: Resolver) -> None:
        self._server.resolver = resolver

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
