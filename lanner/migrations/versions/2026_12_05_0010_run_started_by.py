"""who started a run

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05 09:00:00

The runs table records the user who started each run (the project's owner for runs started before this
revision, which is who could start them then), so a project's runs table can say who started what. No foreign
key: its check would share-lock the user's row, on which concurrent starts and the ledger then deadlock.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('started_by_id', sa.String(length=32), nullable=True))
    op.execute("UPDATE runs SET started_by_id = (SELECT models.owner_id FROM models WHERE models.id = runs.model_id)")


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('started_by_id')
