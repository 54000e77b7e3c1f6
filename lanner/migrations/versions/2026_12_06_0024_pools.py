"""pools

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06 11:00:00

GPUs on demand: ``runs.provisioning_since`` (a launched run waiting for its pool's node), ``pool_launches`` (how
long each pool took to bring a node up: the start time runs are told) and ``pool_usage`` (node-seconds per pool
per day, for the operator's cost).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0024'
down_revision: str | None = '0023'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('runs') as batch:
        batch.add_column(sa.Column('provisioning_since', lanner.db.UTCDateTime(timezone=True), nullable=True))
    op.create_table('pool_launches',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('pool', sa.String(length=64), nullable=False),
    sa.Column('gpu_type', sa.String(length=64), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('requested_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('ended_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('outcome', sa.String(length=20), nullable=False),
    sa.Column('seconds', sa.Double(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_pool_launches_run_id_runs'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_pool_launches'))
    )
    op.create_index(op.f('ix_pool_launches_pool'), 'pool_launches', ['pool'], unique=False)
    op.create_index(op.f('ix_pool_launches_run_id'), 'pool_launches', ['run_id'], unique=False)
    op.create_table('pool_usage',
    sa.Column('pool', sa.String(length=64), nullable=False),
    sa.Column('day', sa.String(length=10), nullable=False),
    sa.Column('node_seconds', sa.Double(), nullable=False),
    sa.Column('updated_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('pool', 'day', name=op.f('pk_pool_usage'))
    )


def downgrade() -> None:
    op.drop_table('pool_usage')
    op.drop_index(op.f('ix_pool_launches_run_id'), table_name='pool_launches')
    op.drop_index(op.f('ix_pool_launches_pool'), table_name='pool_launches')
    op.drop_table('pool_launches')
    with op.batch_alter_table('runs') as batch:
        batch.drop_column('provisioning_since')
