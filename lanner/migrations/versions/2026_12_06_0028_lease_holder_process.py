"""Which process holds a lease

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06 17:00:00

A lease row also names its holder's process as the kernel sees it (``lanner.db.leases.this_process``: the
machine's boot and pid namespace, the pid and the process's start time), so a server restarted on the same
machine takes over at once the leases of the process it replaces, once that process is provably dead, instead
of waiting for them to expire. Rows from before this revision name none: they expire as before.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0028'
down_revision: str | None = '0027'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('leases', schema=None) as batch_op:
        batch_op.add_column(sa.Column('process', sa.String(length=120), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('leases', schema=None) as batch_op:
        batch_op.drop_column('process')
