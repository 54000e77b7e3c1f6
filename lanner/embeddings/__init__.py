"""Embeddings (issue 31): a vector per image from a model, computed by a job of the training executor interface,
and the similar-images search over them (``datasets.embeddings``, ``images.find_similar_images``,
``models.find_similar_training_images``)."""
