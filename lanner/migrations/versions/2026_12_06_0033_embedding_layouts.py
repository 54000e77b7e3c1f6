"""Embedding layouts: a dataset's map

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-06 18:00:00

One 2-D layout of a dataset's vectors per dataset (``datasets.clustering``), with the model digest and dataset
revision it was computed from.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0033'
down_revision: str | None = '0032'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'embedding_layouts',
        sa.Column('dataset_id', sa.String(32), nullable=False),
        sa.Column('model_sha256', sa.String(64), nullable=False),
        sa.Column('revision', sa.Integer(), nullable=False),
        sa.Column('count', sa.Integer(), nullable=False),
        sa.Column('data', sa.LargeBinary(), nullable=True),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('computed_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column('updated_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'],
                                name=op.f('fk_embedding_layouts_dataset_id_datasets'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('dataset_id', name=op.f('pk_embedding_layouts')),
    )


def downgrade() -> None:
    op.drop_table('embedding_layouts')
