"""import jobs and blob references

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05 04:48:18

Imports become durable jobs (a server that dies mid-import finds them on start-up). Every column that holds a
blob digest gets an index: the collector and the blob route ask "does anything still refer to this digest?".
Upload sessions get the end of their URL's life, after which an unfinished one is expired and its file freed.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('import_jobs',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('dataset_id', sa.String(length=32), nullable=False),
    sa.Column('owner_id', sa.String(length=32), nullable=False),
    sa.Column('upload_id', sa.String(length=32), nullable=True),
    sa.Column('filename', sa.String(length=255), nullable=False),
    sa.Column('source_sha256', sa.String(length=64), nullable=True),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('worker', sa.String(length=200), nullable=True),
    sa.Column('heartbeat_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('started_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('finished_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], name=op.f('fk_import_jobs_dataset_id_datasets'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['owner_id'], ['users.id'], name=op.f('fk_import_jobs_owner_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_import_jobs'))
    )
    with op.batch_alter_table('import_jobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_import_jobs_dataset_id'), ['dataset_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_import_jobs_owner_id'), ['owner_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_import_jobs_source_sha256'), ['source_sha256'], unique=False)
        batch_op.create_index(batch_op.f('ix_import_jobs_status'), ['status'], unique=False)

    with op.batch_alter_table('dataset_exports', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_dataset_exports_sha256'), ['sha256'], unique=False)

    with op.batch_alter_table('dataset_items', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_dataset_items_sha256'), ['sha256'], unique=False)

    with op.batch_alter_table('image_blobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_image_blobs_thumb_sha256'), ['thumb_sha256'], unique=False)

    with op.batch_alter_table('models', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_models_weights_sha256'), ['weights_sha256'], unique=False)

    with op.batch_alter_table('staged_uploads', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_staged_uploads_sha256'), ['sha256'], unique=False)

    with op.batch_alter_table('upload_sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('expires_at', lanner.db.UTCDateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f('ix_upload_sessions_sha256'), ['sha256'], unique=False)
    # Sessions from before: their URLs had no recorded end, so they end now (the collector adds its grace).
    op.execute("UPDATE upload_sessions SET expires_at = created_at")



def downgrade() -> None:
    with op.batch_alter_table('upload_sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_upload_sessions_sha256'))
        batch_op.drop_column('expires_at')

    with op.batch_alter_table('staged_uploads', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_staged_uploads_sha256'))

    with op.batch_alter_table('models', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_models_weights_sha256'))

    with op.batch_alter_table('image_blobs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_image_blobs_thumb_sha256'))

    with op.batch_alter_table('dataset_items', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_dataset_items_sha256'))

    with op.batch_alter_table('dataset_exports', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_dataset_exports_sha256'))

    with op.batch_alter_table('import_jobs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_import_jobs_status'))
        batch_op.drop_index(batch_op.f('ix_import_jobs_source_sha256'))
        batch_op.drop_index(batch_op.f('ix_import_jobs_owner_id'))
        batch_op.drop_index(batch_op.f('ix_import_jobs_dataset_id'))

    op.drop_table('import_jobs')
