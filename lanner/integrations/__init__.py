"""Buckets as datasets: a user's S3, GCS or Azure storage connected with read-only credentials (encrypted with
the operator's key), browsed, and imported in place (pixels stay in the bucket, pinned to each object's ETag)."""
