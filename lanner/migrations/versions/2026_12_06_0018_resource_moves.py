"""resource moves

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06 18:40:00

Where a dataset or project moved from (``lanner.teams.transfers``): its old address keeps answering for it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0018'
down_revision: str | None = '0017'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('resource_moves',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('from_owner_id', sa.String(length=32), nullable=False),
    sa.Column('from_slug', sa.String(length=128), nullable=False),
    sa.Column('resource_id', sa.String(length=32), nullable=False),
    sa.Column('moved_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['from_owner_id'], ['users.id'], name=op.f('fk_resource_moves_from_owner_id_users'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_resource_moves'))
    )
    op.create_index('ix_resource_moves_from', 'resource_moves', ['kind', 'from_owner_id', 'from_slug'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_resource_moves_from', table_name='resource_moves')
    op.drop_table('resource_moves')
