"""Copy-detection heads, one per vector key

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-07 03:10:00

The first embedding job of a vector key trains a small network on edited copies of the dataset's images
(``embeddings.head``); similar-images indexes apply it to the stored vectors. Nothing to migrate: keys analysed
before have no head, and their indexes stay as they were until a job of the key trains one.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0037'
down_revision: str | None = '0036'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'embedding_heads',
        sa.Column('model_sha256', sa.String(length=64), nullable=False),
        sa.Column('sha256', sa.String(length=64), nullable=False),
        sa.Column('images', sa.Integer(), nullable=False),
        sa.Column('data', sa.LargeBinary(), nullable=False),
        sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('model_sha256', name=op.f('pk_embedding_heads')),
    )


def downgrade() -> None:
    op.drop_table('embedding_heads')
