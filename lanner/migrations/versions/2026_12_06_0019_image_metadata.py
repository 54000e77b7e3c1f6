"""image metadata

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06 22:00:00

An image's custom fields (``images.update {metadata}``), kept by clones and versions like its labels.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0019'
down_revision: str | None = '0018'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('dataset_items', schema=None) as batch_op:
        batch_op.add_column(sa.Column('metadata', sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('dataset_items', schema=None) as batch_op:
        batch_op.drop_column('metadata')
