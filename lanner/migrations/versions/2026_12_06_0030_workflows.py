"""Workflows (the SDK's agents) and the collect template's settings and counters

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-06 17:40:00

``workflows``: one saved graph document per row, owned by a workspace, replaced whole at a version; deleted
ones stay (``deleted_at``) and collect nothing. The collect template's deployment, dataset, band, rate, daily
cap and counters are derived at each save (``lanner.workflows``).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0030'
down_revision: str | None = '0029'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'workflows',
        sa.Column('id', sa.String(length=32), nullable=False),
        sa.Column('owner_id', sa.String(length=32), nullable=False),
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('graph', sa.JSON(), nullable=False),
        sa.Column('deleted_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column('active', sa.Boolean(), nullable=False),
        sa.Column('deployment_id', sa.String(length=32), nullable=True),
        sa.Column('dataset_id', sa.String(length=32), nullable=True),
        sa.Column('conf_low', sa.Float(), nullable=False),
        sa.Column('conf_high', sa.Float(), nullable=False),
        sa.Column('include_empty', sa.Boolean(), nullable=False),
        sa.Column('rate', sa.Float(), nullable=False),
        sa.Column('daily_cap', sa.Integer(), nullable=False),
        sa.Column('split', sa.String(length=10), nullable=False),
        sa.Column('captured_day', sa.String(length=10), nullable=True),
        sa.Column('captured_today', sa.Integer(), nullable=False),
        sa.Column('captured_total', sa.BigInteger(), nullable=False),
        sa.Column('last_captured_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column('updated_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['owner_id'], ['users.id'], name=op.f('fk_workflows_owner_id_users'),
                                ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['deployment_id'], ['deployments.id'],
                                name=op.f('fk_workflows_deployment_id_deployments'), ondelete='SET NULL'),
        sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], name=op.f('fk_workflows_dataset_id_datasets'),
                                ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_workflows')),
    )
    op.create_index('ix_workflows_owner_updated', 'workflows', ['owner_id', 'updated_at'], unique=False)
    op.create_index(op.f('ix_workflows_owner_id'), 'workflows', ['owner_id'], unique=False)
    op.create_index(op.f('ix_workflows_active'), 'workflows', ['active'], unique=False)
    op.create_index(op.f('ix_workflows_deployment_id'), 'workflows', ['deployment_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_workflows_deployment_id'), table_name='workflows')
    op.drop_index(op.f('ix_workflows_active'), table_name='workflows')
    op.drop_index(op.f('ix_workflows_owner_id'), table_name='workflows')
    op.drop_index('ix_workflows_owner_updated', table_name='workflows')
    op.drop_table('workflows')
