"""HTTP plumbing every route shares: the request dependencies (`deps`), the one error shape (`handlers`), rate
limits, the body limit, security headers and routes served without FastAPI's per-request machinery."""
