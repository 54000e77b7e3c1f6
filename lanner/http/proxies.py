"""The client's address behind reverse proxies: X-Forwarded-For is believed only from the proxies the operator
lists in LANNER_TRUSTED_PROXIES (addresses and CIDR networks; none by default), so a caller cannot pick the
address that rate limits count by sending the header itself.

The rewriting is uvicorn's own ``ProxyHeadersMiddleware`` (the one ``--forwarded-allow-ips`` configures), not a
parser of ours: it walks X-Forwarded-For from the right and takes the first address that is not a trusted
proxy, which is the only safe reading of a header every hop appends to (the left-most entries are whatever
the client wrote). It is installed by the app, in front of the fast lane, instead of through uvicorn's options,
so the setting means the same under any ASGI server and in tests, and ``lanner serve`` turns uvicorn's own copy
off: uvicorn's default trusts 127.0.0.1, which would let any local process name its address. It reads
X-Forwarded-For and X-Forwarded-Proto, not RFC 7239 ``Forwarded``; nginx, HAProxy, Traefik, Caddy and the cloud
load balancers all send X-Forwarded-For.
"""

from __future__ import annotations

from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from lanner.http.direct_route import FastAPIWithFastLane


def install(app: FastAPIWithFastLane, trusted: list[str]) -> None:
    """Believe X-Forwarded-For from ``trusted`` (validated by the settings); nothing to install for none."""
    if trusted:
        app.wrap_outermost(lambda inner: ProxyHeadersMiddleware(inner, trusted_hosts=trusted))  # type: ignore[arg-type]
