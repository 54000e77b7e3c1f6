"""Uploads settled after completion

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06 17:10:00

A file PUT straight into a bucket is checked at ``upload.complete`` by its size only (one HEAD); it is hashed and
filed under its digest afterwards (``storage.upload_sessions.settle``). ``staged`` marks a session whose bytes
still wait at its slot's staging key: nothing may delete them, and the settle loop looks for these rows.
Sessions from before this revision were all hashed at completion.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0029'
down_revision: str | None = '0028'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('upload_sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('staged', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.create_index(batch_op.f('ix_upload_sessions_staged'), ['staged'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('upload_sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_upload_sessions_staged'))
        batch_op.drop_column('staged')
