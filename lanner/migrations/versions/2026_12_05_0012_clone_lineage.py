"""what a model or project was cloned from

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05 09:00:00

``models.clone`` and ``projects.clone`` record the row they copied (``clonedFrom``, ``sourceModel``,
``cloneCount``). No foreign key: the original may be deleted before its copies.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0012'
down_revision: str | None = '0011'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ('models', 'projects'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('cloned_from_id', sa.String(length=32), nullable=True))
            batch_op.create_index(batch_op.f(f'ix_{table}_cloned_from_id'), ['cloned_from_id'], unique=False)


def downgrade() -> None:
    for table in ('projects', 'models'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_index(batch_op.f(f'ix_{table}_cloned_from_id'))
            batch_op.drop_column('cloned_from_id')
