"""purpose of datasets and projects Lanner made

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06 05:10:00

``purpose`` marks a dataset or project Lanner made for its own work (a labelling assistant's, the demo's
pretraining data), which lists leave out. Existing assistant datasets and projects are marked.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0022'
down_revision: str | None = '0021'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ('datasets', 'projects'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('purpose', sa.String(length=20), nullable=True))
    op.execute("UPDATE datasets SET purpose = 'assistant' WHERE id IN "
               "(SELECT training_dataset_id FROM assistants WHERE training_dataset_id IS NOT NULL)")
    op.execute("UPDATE projects SET purpose = 'assistant' WHERE id IN (SELECT models.project_id FROM models "
               "JOIN assistant_rounds ON assistant_rounds.model_id = models.id)")


def downgrade() -> None:
    for table in ('datasets', 'projects'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column('purpose')
