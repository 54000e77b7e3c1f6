"""Storage integrations: buckets as datasets

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-06 14:00:00

Connected buckets (credentials sealed with LANNER_SECRETS_KEY), the bucket objects imported images stand for
(pinned to their ETag), and bucket imports (queued, running, succeeded, failed, with progress).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0027'
down_revision: str | None = '0026'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'storage_integrations',
        sa.Column('id', sa.String(32), nullable=False),
        sa.Column('owner_id', sa.String(32), nullable=False),
        sa.Column('provider', sa.String(10), nullable=False),
        sa.Column('identity', sa.String(300), nullable=False),
        sa.Column('targets', sa.JSON(), nullable=False),
        sa.Column('endpoint', sa.String(500), nullable=True),
        sa.Column('region', sa.String(64), nullable=True),
        sa.Column('processing', sa.Boolean(), nullable=False),
        sa.Column('secret', sa.Text(), nullable=False),
        sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['owner_id'], ['users.id'], name=op.f('fk_storage_integrations_owner_id_users'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_storage_integrations')),
    )
    op.create_index(op.f('ix_storage_integrations_owner_id'), 'storage_integrations', ['owner_id'])
    op.create_table(
        'bucket_objects',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('owner_id', sa.String(32), nullable=False),
        sa.Column('integration_id', sa.String(32), nullable=True),
        sa.Column('target', sa.String(255), nullable=False),
        sa.Column('key', sa.String(1024), nullable=False),
        sa.Column('etag', sa.String(200), nullable=False),
        sa.Column('size', sa.BigInteger(), nullable=False),
        sa.Column('sha256', sa.String(64), nullable=False),
        sa.Column('state', sa.String(10), nullable=False),
        sa.Column('checked_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['owner_id'], ['users.id'], name=op.f('fk_bucket_objects_owner_id_users'),
                                ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['integration_id'], ['storage_integrations.id'],
                                name=op.f('fk_bucket_objects_integration_id_storage_integrations'),
                                ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_bucket_objects')),
        sa.UniqueConstraint('owner_id', 'integration_id', 'target', 'key', 'etag',
                            name=op.f('uq_bucket_objects_owner_id')),
    )
    op.create_index(op.f('ix_bucket_objects_owner_id'), 'bucket_objects', ['owner_id'])
    op.create_index(op.f('ix_bucket_objects_integration_id'), 'bucket_objects', ['integration_id'])
    op.create_index(op.f('ix_bucket_objects_sha256'), 'bucket_objects', ['sha256'])
    op.create_table(
        'bucket_imports',
        sa.Column('id', sa.String(32), nullable=False),
        sa.Column('dataset_id', sa.String(32), nullable=False),
        sa.Column('owner_id', sa.String(32), nullable=False),
        sa.Column('integration_id', sa.String(32), nullable=True),
        sa.Column('target', sa.String(255), nullable=False),
        sa.Column('prefix', sa.String(1024), nullable=False),
        sa.Column('status', sa.String(20), nullable=False),
        sa.Column('stage', sa.String(20), nullable=True),
        sa.Column('done', sa.Integer(), nullable=False),
        sa.Column('total', sa.Integer(), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('result', sa.JSON(), nullable=True),
        sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column('started_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column('heartbeat_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column('finished_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], name=op.f('fk_bucket_imports_dataset_id_datasets'),
                                ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['owner_id'], ['users.id'], name=op.f('fk_bucket_imports_owner_id_users'),
                                ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['integration_id'], ['storage_integrations.id'],
                                name=op.f('fk_bucket_imports_integration_id_storage_integrations'),
                                ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_bucket_imports')),
    )
    op.create_index(op.f('ix_bucket_imports_dataset_id'), 'bucket_imports', ['dataset_id'])
    op.create_index(op.f('ix_bucket_imports_owner_id'), 'bucket_imports', ['owner_id'])
    op.create_index(op.f('ix_bucket_imports_status'), 'bucket_imports', ['status'])


def downgrade() -> None:
    op.drop_table('bucket_imports')
    op.drop_table('bucket_objects')
    op.drop_table('storage_integrations')
