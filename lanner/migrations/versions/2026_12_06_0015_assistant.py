"""the labelling assistant

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05 11:19:37

A dataset's assistant (``lanner/assistant``): its settings, its training rounds (each an ordinary run) and the
uncertainty of each unlabelled image under its newest model.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0015'
down_revision: str | None = '0014'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('assistants',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('dataset_id', sa.String(length=32), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('min_labels', sa.Integer(), nullable=False),
    sa.Column('every', sa.Integer(), nullable=False),
    sa.Column('gpu_type', sa.String(length=64), nullable=False),
    sa.Column('epochs', sa.Integer(), nullable=False),
    sa.Column('imgsz', sa.Integer(), nullable=False),
    sa.Column('training_dataset_id', sa.String(length=32), nullable=True),
    sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], name=op.f('fk_assistants_dataset_id_datasets'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_assistants')),
    sa.UniqueConstraint('dataset_id', name=op.f('uq_assistants_dataset_id'))
    )
    with op.batch_alter_table('assistants', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_assistants_enabled'), ['enabled'], unique=False)

    op.create_table('assistant_rounds',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('assistant_id', sa.String(length=32), nullable=False),
    sa.Column('round', sa.Integer(), nullable=False),
    sa.Column('labelled', sa.Integer(), nullable=False),
    sa.Column('model_id', sa.String(length=32), nullable=True),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('reason', sa.String(length=500), nullable=True),
    sa.Column('map50', sa.Float(), nullable=True),
    sa.Column('started_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('completed_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('scored', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['assistant_id'], ['assistants.id'], name=op.f('fk_assistant_rounds_assistant_id_assistants'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_assistant_rounds_model_id_models'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_assistant_rounds')),
    sa.UniqueConstraint('assistant_id', 'round', name=op.f('uq_assistant_rounds_assistant_id'))
    )
    with op.batch_alter_table('assistant_rounds', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_assistant_rounds_assistant_id'), ['assistant_id'], unique=False)

    op.create_table('assistant_scores',
    sa.Column('assistant_id', sa.String(length=32), nullable=False),
    sa.Column('item_key', sa.String(length=16), nullable=False),
    sa.Column('round', sa.Integer(), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['assistant_id'], ['assistants.id'], name=op.f('fk_assistant_scores_assistant_id_assistants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('assistant_id', 'item_key', name=op.f('pk_assistant_scores'))
    )
    with op.batch_alter_table('assistant_scores', schema=None) as batch_op:
        batch_op.create_index('ix_assistant_scores_assistant_score', ['assistant_id', 'score'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('assistant_scores', schema=None) as batch_op:
        batch_op.drop_index('ix_assistant_scores_assistant_score')

    op.drop_table('assistant_scores')
    with op.batch_alter_table('assistant_rounds', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_assistant_rounds_assistant_id'))

    op.drop_table('assistant_rounds')
    with op.batch_alter_table('assistants', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_assistants_enabled'))

    op.drop_table('assistants')
