"""Leases of background loops

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06 14:00:00

Several server processes (``lanner serve --workers N``, or several hosts) share one database: each background
loop is led by one of them at a time, through a lease per loop (``lanner.db.leases``), renewed by its holder and
taken over once it expires. Times are seconds since the epoch on the database's clock.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0026'
down_revision: str | None = '0025'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'leases',
        sa.Column('name', sa.String(length=100), nullable=False),
        sa.Column('holder', sa.String(length=120), nullable=False),
        sa.Column('acquired_at', sa.Float(), nullable=False),
        sa.Column('expires_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('name', name=op.f('pk_leases')),
    )


def downgrade() -> None:
    op.drop_table('leases')
