"""teams

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05 15:30:00

Teams (``lanner/teams``): a team is a ``users`` row with ``account_type = 'team'``, so it owns datasets, projects
and a ledger account through the same ``owner_id``; its members and their roles, single-use invitations, and the
activity log of every workspace.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import lanner.db

revision: str = '0017'
down_revision: str | None = '0016'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('account_type', sa.String(length=10), nullable=False,
                                      server_default='personal'))
    op.create_table('team_members',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('team_id', sa.String(length=32), nullable=False),
    sa.Column('user_id', sa.String(length=32), nullable=False),
    sa.Column('role', sa.String(length=10), nullable=False),
    sa.Column('monthly_budget_micros', sa.BigInteger(), nullable=True),
    sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['team_id'], ['users.id'], name=op.f('fk_team_members_team_id_users'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_team_members_user_id_users'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_team_members')),
    sa.UniqueConstraint('team_id', 'user_id', name=op.f('uq_team_members_team_id'))
    )
    op.create_index(op.f('ix_team_members_team_id'), 'team_members', ['team_id'], unique=False)
    op.create_index(op.f('ix_team_members_user_id'), 'team_members', ['user_id'], unique=False)
    op.create_table('team_invitations',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('team_id', sa.String(length=32), nullable=False),
    sa.Column('role', sa.String(length=10), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('created_by_id', sa.String(length=32), nullable=True),
    sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('expires_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('used_at', lanner.db.UTCDateTime(timezone=True), nullable=True),
    sa.Column('used_by_id', sa.String(length=32), nullable=True),
    sa.ForeignKeyConstraint(['team_id'], ['users.id'], name=op.f('fk_team_invitations_team_id_users'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['created_by_id'], ['users.id'], name=op.f('fk_team_invitations_created_by_id_users'),
                            ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['used_by_id'], ['users.id'], name=op.f('fk_team_invitations_used_by_id_users'),
                            ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_team_invitations')),
    sa.UniqueConstraint('digest', name=op.f('uq_team_invitations_digest'))
    )
    op.create_index(op.f('ix_team_invitations_team_id'), 'team_invitations', ['team_id'], unique=False)
    op.create_table('activity_events',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('owner_id', sa.String(length=32), nullable=False),
    sa.Column('actor_id', sa.String(length=32), nullable=True),
    sa.Column('action', sa.String(length=40), nullable=False),
    sa.Column('target', sa.String(length=300), nullable=False),
    sa.Column('detail', sa.JSON(), nullable=False),
    sa.Column('created_at', lanner.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['owner_id'], ['users.id'], name=op.f('fk_activity_events_owner_id_users'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['actor_id'], ['users.id'], name=op.f('fk_activity_events_actor_id_users'),
                            ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_activity_events'))
    )
    op.create_index('ix_activity_events_owner_created', 'activity_events', ['owner_id', 'created_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_activity_events_owner_created', table_name='activity_events')
    op.drop_table('activity_events')
    op.drop_index(op.f('ix_team_invitations_team_id'), table_name='team_invitations')
    op.drop_table('team_invitations')
    op.drop_index(op.f('ix_team_members_user_id'), table_name='team_members')
    op.drop_index(op.f('ix_team_members_team_id'), table_name='team_members')
    op.drop_table('team_members')
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('account_type')
