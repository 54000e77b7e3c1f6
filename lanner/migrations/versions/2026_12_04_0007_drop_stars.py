"""drop stars

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04 18:40:00

The stars table (0002) was never written or read: no endpoint stars anything and ``starCount`` is always 0.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('stars', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_stars_target_id'))
    op.drop_table('stars')


def downgrade() -> None:
    op.create_table('stars',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('user_id', sa.String(length=32), nullable=False),
    sa.Column('target_type', sa.String(length=20), nullable=False),
    sa.Column('target_id', sa.String(length=32), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_stars_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_stars')),
    sa.UniqueConstraint('user_id', 'target_type', 'target_id', name=op.f('uq_stars_user_id'))
    )
    with op.batch_alter_table('stars', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_stars_target_id'), ['target_id'], unique=False)
