"""Auto-annotation and face blurring of a dataset's images with a model (the SDK's ``datasets.batch``)."""
