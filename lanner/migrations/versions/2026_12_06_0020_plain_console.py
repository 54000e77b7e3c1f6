"""plain console

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 04:30:00

Console rows stored before ``lanner.training.console`` cleaned them at ingestion hold the trainer's ANSI colour
codes: remove them once, so every stored line is plain. The expression is a frozen copy of the module's.
"""

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0020'
down_revision: str | None = '0019'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[@-_]")
_BATCH = 500


def upgrade() -> None:
    bind = op.get_bind()
    chunks = sa.table('console_chunks', sa.column('id', sa.Integer), sa.column('content', sa.Text))
    last = 0
    while True:  # in batches by id: a large table is never read into memory at once
        rows = bind.execute(sa.select(chunks.c.id, chunks.c.content)
                            .where(chunks.c.id > last, chunks.c.content.contains('\x1b'))
                            .order_by(chunks.c.id).limit(_BATCH)).all()
        if not rows:
            return
        bind.execute(chunks.update().where(chunks.c.id == sa.bindparam('row_id')).values(content=sa.bindparam('text')),
                     [{'row_id': row_id, 'text': _ANSI.sub('', content)} for row_id, content in rows])
        last = rows[-1][0]


def downgrade() -> None:
    pass  # the codes carried nothing a reader needs
