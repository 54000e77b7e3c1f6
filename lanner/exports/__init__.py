"""Model exports (the SDK's ``exports.*``): a model's weights converted to a deployment format by a worker process
through the executor interface, stored as a blob and handed out by a signed link. ``formats`` says what can be
made here, ``arguments`` checks what the caller asks, ``jobs`` owns the row's states, ``queue`` runs them and
``worker`` is the process that exports."""
