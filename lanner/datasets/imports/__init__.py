"""The import pipeline: an upload becomes dataset items, all or nothing, in a worker process.

``jobs`` (the durable ``ImportJob`` rows) → ``queue`` (the server's loop that runs them fairly in worker
processes) → ``worker`` (one process per import) → ``ingest`` (prepare: unpack, understand, probe; then one
commit) with ``probe_pool``/``probe_worker`` (every core probes and stores images) and ``formats`` (the
archive unpacker and the YOLO, COCO, NDJSON, class-folder and plain-image readers). Apart from the rest of
``datasets`` because it is most of its code and all of its hostile-input handling; it writes datasets only
through ``datasets.service`` and ``datasets.state``."""
