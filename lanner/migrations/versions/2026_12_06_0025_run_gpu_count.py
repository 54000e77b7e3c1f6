"""GPUs per run

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-06 09:00:00

A run Lanner launches may train on several GPUs of its type on one node (``gpuCount``, DDP); the runs table keeps
how many. ``price_micros_per_hour`` is already the run's whole price per hour (the GPU's times the count). Runs
from before this revision had one.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0025'
down_revision: str | None = '0024'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('gpu_count', sa.Integer(), server_default='1', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('gpu_count')
