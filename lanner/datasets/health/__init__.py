"""A dataset's health, one subject: the checks (``checks``: pure functions over plain records, no database) and
the report as stored and served (``report``: run over the current manifest, per-image issue codes, the summary
kept per revision, refreshed where content changes and never by a read)."""
