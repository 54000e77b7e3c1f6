"""Review scores

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-06 20:20:00

A dataset's review scores jobs (a model's predictions scored against the labels) and each image's scores
(mistakenness, uniqueness, findings) with the Review queue's reviewed mark.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "review_jobs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("dataset_id", sa.String(length=32), nullable=False),
        sa.Column("owner_id", sa.String(length=32), nullable=False),
        sa.Column("model_id", sa.String(length=32), nullable=True),
        sa.Column("model_sha256", sa.String(length=64), nullable=False),
        sa.Column("model_label", sa.String(length=300), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("imgsz", sa.Integer(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("class_map", sa.JSON(), nullable=True),
        sa.Column("keys", sa.JSON(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("processed", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("executor", sa.String(length=20), nullable=True),
        sa.Column("external_id", sa.String(length=200), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("slot", sa.String(length=32), nullable=True),
        sa.Column("started_at", lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("completed_at", lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_review_jobs_dataset_id_datasets"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["model_id"], ["models.id"], name=op.f("fk_review_jobs_model_id_models"),
                                ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name=op.f("fk_review_jobs_owner_id_users"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_review_jobs")),
    )
    with op.batch_alter_table("review_jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_review_jobs_dataset_id"), ["dataset_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_review_jobs_owner_id"), ["owner_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_review_jobs_status"), ["status"], unique=False)

    op.create_table(
        "image_scores",
        sa.Column("dataset_id", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("mistakenness", sa.Float(), nullable=False),
        sa.Column("uniqueness", sa.Float(), nullable=True),
        sa.Column("findings", sa.JSON(), nullable=False),
        sa.Column("kinds", sa.JSON(), nullable=False),
        sa.Column("reviewed_at", lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_image_scores_dataset_id_datasets"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["job_id"], ["review_jobs.id"], name=op.f("fk_image_scores_job_id_review_jobs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("dataset_id", "key", name=op.f("pk_image_scores")),
    )
    with op.batch_alter_table("image_scores", schema=None) as batch_op:
        batch_op.create_index("ix_image_scores_dataset_mistakenness", ["dataset_id", "mistakenness"], unique=False)
        batch_op.create_index(batch_op.f("ix_image_scores_job_id"), ["job_id"], unique=False)


def downgrade() -> None:
    op.drop_table("image_scores")
    op.drop_table("review_jobs")
