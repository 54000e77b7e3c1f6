"""annotation: label revisions, labelled-by, proposals

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06 09:00:00

Labelling in the browser (``lanner/annotation``): every image's labels carry a revision bumped on each change
(a stale save is a conflict), who labelled it and when, and the id of the last edit applied (a retried save is
not applied twice). ``label_proposals`` records the proposals a model served for an image, resolved when the
image is next saved with how many were accepted unchanged.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0014'
down_revision: str | None = '0013'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('dataset_items', schema=None) as batch_op:
        batch_op.add_column(sa.Column('label_rev', sa.Integer(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('labelled_by', sa.String(length=300), nullable=True))
        batch_op.add_column(sa.Column('labelled_at', lanner.db.UTCDateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('last_edit_id', sa.String(length=64), nullable=True))
    # What was imported with labels was labelled by its import.
    op.execute("UPDATE dataset_items SET labelled_by = 'import' WHERE labels IS NOT NULL OR class_id IS NOT NULL")
    op.create_table('label_proposals',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('dataset_id', sa.String(length=32), nullable=False),
    sa.Column('item_key', sa.String(length=16), nullable=False),
    sa.Column('model_id', sa.String(length=32), nullable=False),
    sa.Column('model_ref', sa.String(length=300), nullable=False),
    sa.Column('labels', sa.JSON(), nullable=False),
    sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('resolved_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('shown', sa.Integer(), nullable=False),
    sa.Column('accepted_unchanged', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], name=op.f('fk_label_proposals_dataset_id_datasets'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_label_proposals'))
    )
    with op.batch_alter_table('label_proposals', schema=None) as batch_op:
        batch_op.create_index('ix_label_proposals_open', ['dataset_id', 'item_key', 'resolved_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_label_proposals_model_id'), ['model_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('label_proposals', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_label_proposals_model_id'))
        batch_op.drop_index('ix_label_proposals_open')
    op.drop_table('label_proposals')
    with op.batch_alter_table('dataset_items', schema=None) as batch_op:
        batch_op.drop_column('last_edit_id')
        batch_op.drop_column('labelled_at')
        batch_op.drop_column('labelled_by')
        batch_op.drop_column('label_rev')
