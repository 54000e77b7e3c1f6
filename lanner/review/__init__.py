"""The review queue: per-image mistakenness (a model's confident disagreement with the labels) and uniqueness."""
