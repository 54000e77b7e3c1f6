"""Embeddings: jobs and vectors

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-06 17:00:00

Embedding jobs (queued, starting, running, completed, failed, cancelled, with progress) and one vector per
(model digest, image sha256), shared by every dataset that holds the image.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0032'
down_revision: str | None = '0031'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'embedding_jobs',
        sa.Column('id', sa.String(32), nullable=False),
        sa.Column('dataset_id', sa.String(32), nullable=False),
        sa.Column('owner_id', sa.String(32), nullable=False),
        sa.Column('model_id', sa.String(32), nullable=True),
        sa.Column('model_sha256', sa.String(64), nullable=False),
        sa.Column('model_label', sa.String(300), nullable=False),
        sa.Column('revision', sa.Integer(), nullable=False),
        sa.Column('imgsz', sa.Integer(), nullable=False),
        sa.Column('status', sa.String(20), nullable=False),
        sa.Column('total', sa.Integer(), nullable=False),
        sa.Column('processed', sa.Integer(), nullable=False),
        sa.Column('failed_downloads', sa.Integer(), nullable=False),
        sa.Column('failed_inference', sa.Integer(), nullable=False),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('executor', sa.String(20), nullable=True),
        sa.Column('external_id', sa.String(200), nullable=True),
        sa.Column('attempt', sa.Integer(), nullable=False),
        sa.Column('slot', sa.String(32), nullable=True),
        sa.Column('started_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column('completed_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column('updated_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], name=op.f('fk_embedding_jobs_dataset_id_datasets'),
                                ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['owner_id'], ['users.id'], name=op.f('fk_embedding_jobs_owner_id_users'),
                                ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_embedding_jobs_model_id_models'),
                                ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_embedding_jobs')),
    )
    with op.batch_alter_table('embedding_jobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_embedding_jobs_dataset_id'), ['dataset_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_embedding_jobs_owner_id'), ['owner_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_embedding_jobs_model_sha256'), ['model_sha256'], unique=False)
        batch_op.create_index(batch_op.f('ix_embedding_jobs_status'), ['status'], unique=False)
    op.create_table(
        'image_embeddings',
        sa.Column('model_sha256', sa.String(64), nullable=False),
        sa.Column('image_sha256', sa.String(64), nullable=False),
        sa.Column('dim', sa.Integer(), nullable=False),
        sa.Column('vector', sa.LargeBinary(), nullable=False),
        sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('model_sha256', 'image_sha256', name=op.f('pk_image_embeddings')),
    )


def downgrade() -> None:
    op.drop_table('image_embeddings')
    with op.batch_alter_table('embedding_jobs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_embedding_jobs_status'))
        batch_op.drop_index(batch_op.f('ix_embedding_jobs_model_sha256'))
        batch_op.drop_index(batch_op.f('ix_embedding_jobs_owner_id'))
        batch_op.drop_index(batch_op.f('ix_embedding_jobs_dataset_id'))
    op.drop_table('embedding_jobs')
