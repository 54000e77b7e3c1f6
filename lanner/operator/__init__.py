"""The operator's view of the server (admins only): what the GPU pools cost and what runs on them paid.

Why a package of its own, above the domains: it reads the pools and catalogue (``gpus``), the cluster and the
runs (``training``) and every account's ledger (``billing``) together, for nobody's workspace in particular.

Modules
    ``pools``       each pool now (nodes up, runs, typical start) and per UTC day (node-hours, cost, credits, margin)
    ``prometheus``  the same figures in Prometheus text (``GET /api/operator/metrics``)
    ``router``      ``GET /api/operator/pools`` and ``GET /api/operator/metrics`` (``AdminPrincipal``)
"""
