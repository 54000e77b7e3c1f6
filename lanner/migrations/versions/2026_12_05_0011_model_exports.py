"""model exports

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05 08:17:43

Model exports become durable jobs (``lanner/exports``): a row per requested export, run by a worker process
through the executor, holding the weights it converts while it runs and its artefact once it completed.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('model_exports',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('model_id', sa.String(length=32), nullable=False),
    sa.Column('owner_id', sa.String(length=32), nullable=False),
    sa.Column('format', sa.String(length=20), nullable=False),
    sa.Column('args', sa.JSON(), nullable=False),
    sa.Column('gpu_type', sa.String(length=64), nullable=False),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('source_sha256', sa.String(length=64), nullable=True),
    sa.Column('filename', sa.String(length=255), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=True),
    sa.Column('size', sa.BigInteger(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('failed_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('executor', sa.String(length=20), nullable=True),
    sa.Column('external_id', sa.String(length=200), nullable=True),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('slot', sa.String(length=32), nullable=True),
    sa.Column('started_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('completed_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_model_exports_model_id_models'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['owner_id'], ['users.id'], name=op.f('fk_model_exports_owner_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_model_exports'))
    )
    with op.batch_alter_table('model_exports', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_model_exports_fingerprint'), ['fingerprint'], unique=False)
        batch_op.create_index(batch_op.f('ix_model_exports_model_id'), ['model_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_model_exports_owner_id'), ['owner_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_model_exports_sha256'), ['sha256'], unique=False)
        batch_op.create_index(batch_op.f('ix_model_exports_source_sha256'), ['source_sha256'], unique=False)
        batch_op.create_index(batch_op.f('ix_model_exports_status'), ['status'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('model_exports', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_model_exports_status'))
        batch_op.drop_index(batch_op.f('ix_model_exports_source_sha256'))
        batch_op.drop_index(batch_op.f('ix_model_exports_sha256'))
        batch_op.drop_index(batch_op.f('ix_model_exports_owner_id'))
        batch_op.drop_index(batch_op.f('ix_model_exports_model_id'))
        batch_op.drop_index(batch_op.f('ix_model_exports_fingerprint'))

    op.drop_table('model_exports')
