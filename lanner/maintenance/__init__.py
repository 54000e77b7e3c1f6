"""Housekeeping that touches every domain, so it sits above them all: blob collection and the trash purge."""
