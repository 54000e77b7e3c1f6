"""An analysis remembers whether its model was chosen

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-06 23:40:00

``datasets.create_embeddings`` may name the model (``modelId``); ``chosen`` marks a job whose model the person
picked, so the dataset's freshness is judged against that model until they pick another
(``embeddings.service.freshness``) instead of against the automatic pick. Jobs from before were all automatic.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0036'
down_revision: str | None = '0035'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('embedding_jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('chosen', sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('embedding_jobs', schema=None) as batch_op:
        batch_op.drop_column('chosen')
