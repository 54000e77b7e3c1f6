"""Tests use the same synthetic data as ``lanner gpus probe``."""

from lanner.synthetic import CLASSES, make_detection_dataset

__all__ = ["CLASSES", "make_detection_dataset"]
