"""Teams: shared workspaces, their members' roles and their activity log."""

from lanner.teams import activity  # noqa: F401  (registers the activity log's flush hook wherever teams are used)
