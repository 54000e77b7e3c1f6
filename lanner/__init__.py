"""Lanner: a self-hosted computer-vision platform that speaks the Ultralytics Platform protocol."""

__version__ = "0.1.0"
