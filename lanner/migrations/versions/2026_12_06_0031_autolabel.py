"""Auto-annotation runs

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-06 17:10:06

A dataset's auto-annotation (and face-blur) runs, and the images each run has recorded: the idempotency record
that lets a resumed attempt skip what an earlier one finished.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "autolabel_jobs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("dataset_id", sa.String(length=32), nullable=False),
        sa.Column("owner_id", sa.String(length=32), nullable=False),
        sa.Column("requested_by", sa.String(length=32), nullable=True),
        sa.Column("model_id", sa.String(length=32), nullable=True),
        sa.Column("model_ref", sa.String(length=300), nullable=True),
        sa.Column("weights_sha256", sa.String(length=64), nullable=True),
        sa.Column("operation", sa.String(length=10), nullable=False),
        sa.Column("preview", sa.Boolean(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("iou", sa.Float(), nullable=False),
        sa.Column("box_scale", sa.Float(), nullable=False),
        sa.Column("include_annotated", sa.Boolean(), nullable=False),
        sa.Column("class_map", sa.JSON(), nullable=True),
        sa.Column("imgsz", sa.Integer(), nullable=False),
        sa.Column("keys", sa.JSON(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("processed", sa.Integer(), nullable=False),
        sa.Column("annotations", sa.Integer(), nullable=False),
        sa.Column("faces", sa.Integer(), nullable=False),
        sa.Column("partial_images", sa.Integer(), nullable=False),
        sa.Column("classes", sa.JSON(), nullable=False),
        sa.Column("previews", sa.JSON(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("price_micros", sa.Integer(), nullable=False),
        sa.Column("charged_micros", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("stopping", sa.Boolean(), nullable=False),
        sa.Column("dismissed", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("executor", sa.String(length=20), nullable=True),
        sa.Column("external_id", sa.String(length=200), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("slot", sa.String(length=32), nullable=True),
        sa.Column("started_at", lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("completed_at", lanner.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", lanner.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_autolabel_jobs_dataset_id_datasets"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["model_id"], ["models.id"], name=op.f("fk_autolabel_jobs_model_id_models"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_autolabel_jobs_owner_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_autolabel_jobs")),
    )
    with op.batch_alter_table("autolabel_jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_autolabel_jobs_dataset_id"), ["dataset_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_autolabel_jobs_owner_id"), ["owner_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_autolabel_jobs_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_autolabel_jobs_weights_sha256"), ["weights_sha256"], unique=False)

    op.create_table(
        "autolabel_images",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=16), nullable=False),
        sa.Column("added", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["autolabel_jobs.id"],
            name=op.f("fk_autolabel_images_job_id_autolabel_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "key", name=op.f("pk_autolabel_images")),
    )


def downgrade() -> None:
    op.drop_table("autolabel_images")
    with op.batch_alter_table("autolabel_jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_autolabel_jobs_weights_sha256"))
        batch_op.drop_index(batch_op.f("ix_autolabel_jobs_status"))
        batch_op.drop_index(batch_op.f("ix_autolabel_jobs_owner_id"))
        batch_op.drop_index(batch_op.f("ix_autolabel_jobs_dataset_id"))

    op.drop_table("autolabel_jobs")
