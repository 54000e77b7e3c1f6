"""starting points

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06 05:00:00

Models offered as pretrained starts beside the official ones (``lanner.projects.starting``).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0021'
down_revision: str | None = '0020'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('starting_points',
                    sa.Column('model_id', sa.String(length=32), nullable=False),
                    sa.Column('note', sa.String(length=300), nullable=False),
                    sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
                    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_starting_points_model_id_models'),
                                            ondelete='CASCADE'),
                    sa.PrimaryKeyConstraint('model_id', name=op.f('pk_starting_points')))


def downgrade() -> None:
    op.drop_table('starting_points')
