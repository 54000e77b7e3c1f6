"""``lanner teams``: the operator's team commands (create a team, add, list and remove members, invitations).
Members manage their teams through the API and the web app; at the command line the operator acts as an owner."""

from __future__ import annotations

from typing import Annotated

import typer

from lanner.accounts.service import require_user
from lanner.cli.common import command_session, err
from lanner.teams import service
from lanner.teams.permissions import ROLES

teams_app = typer.Typer(help="Teams: shared workspaces with members and roles.", no_args_is_help=True)
Role = Annotated[str, typer.Option(help=f"One of {', '.join(ROLES)}.")]


@teams_app.command("create")
def create(name: Annotated[str, typer.Argument(help="The team's name: its workspace, like a username.")],
           owner: Annotated[str, typer.Option(help="An existing user: the team's first owner.")],
           tier: Annotated[str, typer.Option(help="The team's plan: free, pro or enterprise.")] = "free") -> None:
    """Create team NAME owned by OWNER."""
    with command_session() as (_, session):
        team = service.create_team(session, name=name, owner=require_user(session, username=owner), tier=tier)
        err.print(f"created team {team.username} (owner {owner.lower()}, {tier})")
    typer.echo(team.username)


@teams_app.command("add")
def add(team: str, user: str, role: Role = "viewer") -> None:
    """Add USER to TEAM with ROLE."""
    with command_session() as (_, session):
        service.add_member(session, service.OPERATOR, team, user, role)
    err.print(f"{user.lower()} is now {role} of {team.lower()}")


@teams_app.command("role")
def change_role(team: str, user: str, role: Role) -> None:
    """Change USER's role in TEAM."""
    with command_session() as (_, session):
        service.set_role(session, service.OPERATOR, team, user, role)
    err.print(f"{user.lower()} is now {role} of {team.lower()}")


@teams_app.command("remove")
def remove(team: str, user: str) -> None:
    """Remove USER from TEAM: their access ends with their next request."""
    with command_session() as (_, session):
        service.remove_member(session, service.OPERATOR, team, user)
    err.print(f"removed {user.lower()} from {team.lower()}")


@teams_app.command("members")
def members(team: str) -> None:
    """TEAM's members, one per line: username and role."""
    with command_session() as (_, session):
        rows = service.members(session, service.OPERATOR, team)
    for row in rows:
        typer.echo(f"{row['username']}\t{row['role']}")


@teams_app.command("invite")
def invite(team: str, role: Role = "viewer",
           days: Annotated[int, typer.Option(help="Days until the link expires.")] = service.INVITATION_DAYS) -> None:
    """A single-use invitation to TEAM with ROLE; prints its token (shown once)."""
    with command_session() as (_, session):
        invitation, token = service.invite(session, service.OPERATOR, team, role, days)
        err.print(f"invitation to {team.lower()} as {role}, expires {invitation.expires_at:%Y-%m-%d %H:%M} UTC")
    typer.echo(token)


@teams_app.command("top-up")
def top_up(team: str, usd: Annotated[float, typer.Argument(help="Dollars to add, e.g. 25 or 12.50.")]) -> None:
    """Add USD dollars of credit to TEAM (from the operator, like `lanner credits add` for a person); prints the
    team's new balance in cents. Admins move their own credit to a team on its page or with POST
    /api/teams/TEAM/credit."""
    from lanner.billing import service as billing_service  # start-up cost: only this command needs billing

    with command_session() as (_, session):
        account, _ = service.team_for(session, service.OPERATOR, team, "manage_billing")
        billing_service.top_up(session, user_id=account.id, micros=billing_service.dollars_to_micros(usd),
                               description="Top-up by the operator")
        cents = billing_service.micros_to_cents(billing_service.balance_micros(session, user_id=account.id))
    err.print(f"added ${usd:,.2f} to team {account.username}")
    typer.echo(cents)
