"""Image selections: the map's lasso, for the grid to filter by

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-06 20:20:00

A user's selection of a dataset's images (``datasets.models.ImageSelection``) and its items, by key.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0035'
down_revision: str | None = '0034'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'image_selections',
        sa.Column('id', sa.String(32), nullable=False),
        sa.Column('dataset_id', sa.String(32), nullable=False),
        sa.Column('user_id', sa.String(32), nullable=False),
        sa.Column('count', sa.Integer(), nullable=False),
        sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'],
                                name=op.f('fk_image_selections_dataset_id_datasets'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['user_id'], ['users.id'],
                                name=op.f('fk_image_selections_user_id_users'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_image_selections')),
    )
    op.create_index(op.f('ix_image_selections_dataset_id'), 'image_selections', ['dataset_id'])
    op.create_index(op.f('ix_image_selections_user_id'), 'image_selections', ['user_id'])
    op.create_table(
        'image_selection_items',
        sa.Column('selection_id', sa.String(32), nullable=False),
        sa.Column('key', sa.String(16), nullable=False),
        sa.ForeignKeyConstraint(['selection_id'], ['image_selections.id'],
                                name=op.f('fk_image_selection_items_selection_id_image_selections'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('selection_id', 'key', name=op.f('pk_image_selection_items')),
    )


def downgrade() -> None:
    op.drop_table('image_selection_items')
    op.drop_index(op.f('ix_image_selections_user_id'), table_name='image_selections')
    op.drop_index(op.f('ix_image_selections_dataset_id'), table_name='image_selections')
    op.drop_table('image_selections')
