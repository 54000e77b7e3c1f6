"""dedicated endpoints

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05 09:04:01

Dedicated endpoints (``lanner/deployments``): a row per deployment (its model, what it serves, where its
process runs, its metering), its log (requests and lifecycle) and a resource sample a minute.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0013'
down_revision: str | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('deployments',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('owner_id', sa.String(length=32), nullable=False),
    sa.Column('model_id', sa.String(length=32), nullable=True),
    sa.Column('project_slug', sa.String(length=128), nullable=False),
    sa.Column('model_slug', sa.String(length=128), nullable=False),
    sa.Column('task', sa.String(length=20), nullable=True),
    sa.Column('slug', sa.String(length=128), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('region', sa.String(length=40), nullable=False),
    sa.Column('backend', sa.String(length=20), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('status_message', sa.String(length=500), nullable=True),
    sa.Column('runtime', sa.String(length=20), nullable=False),
    sa.Column('export_id', sa.String(length=32), nullable=True),
    sa.Column('weights_sha256', sa.String(length=64), nullable=False),
    sa.Column('artefact_sha256', sa.String(length=64), nullable=False),
    sa.Column('cpu', sa.Integer(), nullable=False),
    sa.Column('memory_gi', sa.Integer(), nullable=False),
    sa.Column('min_instances', sa.Integer(), nullable=False),
    sa.Column('max_instances', sa.Integer(), nullable=False),
    sa.Column('metadata', sa.JSON(), nullable=False),
    sa.Column('external_id', sa.String(length=200), nullable=True),
    sa.Column('url', sa.String(length=500), nullable=True),
    sa.Column('launched_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('ready_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('deployed_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('restarts', sa.Integer(), nullable=False),
    sa.Column('crashes', sa.Integer(), nullable=False),
    sa.Column('retry_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('billing_since', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('instances', sa.Integer(), nullable=False),
    sa.Column('billed_seconds', sa.Float(), nullable=False),
    sa.Column('price_micros_per_hour', sa.BigInteger(), nullable=False),
    sa.Column('charged_micros', sa.BigInteger(), nullable=False),
    sa.Column('request_count', sa.BigInteger(), nullable=False),
    sa.Column('error_count', sa.BigInteger(), nullable=False),
    sa.Column('deleted_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_deployments_model_id_models'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['owner_id'], ['users.id'], name=op.f('fk_deployments_owner_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_deployments')),
    sa.UniqueConstraint('owner_id', 'slug', name=op.f('uq_deployments_owner_id'))
    )
    with op.batch_alter_table('deployments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_deployments_artefact_sha256'), ['artefact_sha256'], unique=False)
        batch_op.create_index(batch_op.f('ix_deployments_model_id'), ['model_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_deployments_owner_id'), ['owner_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_deployments_status'), ['status'], unique=False)
        batch_op.create_index(batch_op.f('ix_deployments_weights_sha256'), ['weights_sha256'], unique=False)

    op.create_table('deployment_logs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('deployment_id', sa.String(length=32), nullable=False),
    sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('severity', sa.String(length=12), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('method', sa.String(length=10), nullable=True),
    sa.Column('path', sa.String(length=300), nullable=True),
    sa.Column('status', sa.Integer(), nullable=True),
    sa.Column('latency_ms', sa.Float(), nullable=True),
    sa.Column('image_bytes', sa.BigInteger(), nullable=True),
    sa.Column('width', sa.Integer(), nullable=True),
    sa.Column('height', sa.Integer(), nullable=True),
    sa.Column('detections', sa.Integer(), nullable=True),
    sa.Column('user_agent', sa.String(length=300), nullable=True),
    sa.ForeignKeyConstraint(['deployment_id'], ['deployments.id'], name=op.f('fk_deployment_logs_deployment_id_deployments'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_deployment_logs'))
    )
    with op.batch_alter_table('deployment_logs', schema=None) as batch_op:
        batch_op.create_index('ix_deployment_logs_deployment_created', ['deployment_id', 'created_at'], unique=False)

    op.create_table('deployment_samples',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('deployment_id', sa.String(length=32), nullable=False),
    sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('cpu_percent', sa.Float(), nullable=True),
    sa.Column('memory_percent', sa.Float(), nullable=True),
    sa.Column('instances', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['deployment_id'], ['deployments.id'], name=op.f('fk_deployment_samples_deployment_id_deployments'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_deployment_samples'))
    )
    with op.batch_alter_table('deployment_samples', schema=None) as batch_op:
        batch_op.create_index('ix_deployment_samples_deployment_created', ['deployment_id', 'created_at'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('deployment_samples', schema=None) as batch_op:
        batch_op.drop_index('ix_deployment_samples_deployment_created')

    op.drop_table('deployment_samples')
    with op.batch_alter_table('deployment_logs', schema=None) as batch_op:
        batch_op.drop_index('ix_deployment_logs_deployment_created')

    op.drop_table('deployment_logs')
    with op.batch_alter_table('deployments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_deployments_weights_sha256'))
        batch_op.drop_index(batch_op.f('ix_deployments_status'))
        batch_op.drop_index(batch_op.f('ix_deployments_owner_id'))
        batch_op.drop_index(batch_op.f('ix_deployments_model_id'))
        batch_op.drop_index(batch_op.f('ix_deployments_artefact_sha256'))

    op.drop_table('deployments')
