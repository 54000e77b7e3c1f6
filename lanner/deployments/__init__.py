"""Dedicated endpoints (``deployments.*``): a model served by its own process (a supervised local subprocess, or
a Ray Serve application on a cluster), with its lifecycle, health, request log, metrics and metering."""
