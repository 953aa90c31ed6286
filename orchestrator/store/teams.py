"""Team membership: which owners belong to which teams.

A team is a name and its members; nothing else. The `team` memory space of a turn is the team
its owner belongs to (`TeamRepository.team_for`), so membership is decided by an admin, never by
what a request says about itself.
"""

from __future__ import annotations

import re

from sqlalchemy import bindparam, delete, select

from orchestrator.errors import Forbidden, UsageError
from orchestrator.store.database import Database, affected
from orchestrator.store.tables import TeamMemberRow

TEAM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""Team names: no `:` (personal team spaces are `owner:<owner>`) and no path characters."""


def personal_space(owner: str) -> str:
    """The team space of an owner who belongs to no team: theirs alone, never a team's name."""
    return f"owner:{owner}"


_TEAMS_OF = (  # every turn reads it (`team_for`): built once
    select(TeamMemberRow.team).where(TeamMemberRow.owner == bindparam("p_owner")).order_by(TeamMemberRow.team)
)


class TeamRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, team: str, owner: str) -> bool:
        """Make `owner` a member of `team`; False when it was one already.

        Raises:
            UsageError: the team name is not valid.
        """
        if not TEAM_ID.fullmatch(team):
            raise UsageError(f"team name {team!r} must match {TEAM_ID.pattern}")
        async with self._db.write() as tx:
            if await tx.get(TeamMemberRow, (team, owner)) is not None:
                return False
            tx.add(TeamMemberRow(team=team, owner=owner, created_at=self._db.clock()))
        return True

    async def remove(self, team: str, owner: str) -> bool:
        """Take `owner` out of `team`; False when it was not a member."""
        async with self._db.write() as tx:
            result = await tx.execute(
                delete(TeamMemberRow).where(TeamMemberRow.team == team, TeamMemberRow.owner == owner)
            )
        return affected(result) > 0

    async def teams_of(self, owner: str) -> list[str]:
        """The teams `owner` belongs to, by name."""
        async with self._db.query() as conn:
            return list(await conn.scalars(_TEAMS_OF, {"p_owner": owner}))

    async def members(self, team: str) -> list[str]:
        query = select(TeamMemberRow.owner).where(TeamMemberRow.team == team).order_by(TeamMemberRow.owner)
        async with self._db.read() as tx:
            return list(await tx.scalars(query))

    async def all(self) -> dict[str, list[str]]:
        """Every team and its members."""
        query = select(TeamMemberRow).order_by(TeamMemberRow.team, TeamMemberRow.owner)
        teams: dict[str, list[str]] = {}
        async with self._db.read() as tx:
            for row in await tx.scalars(query):
                teams.setdefault(row.team, []).append(row.owner)
        return teams

    async def team_for(self, owner: str, asked: str | None = None) -> str:
        """The team space of a turn run by `owner`: `asked` when the owner is a member of it, else
        the owner's first team, else the owner's personal space.

        Raises:
            Forbidden: `asked` names a team the owner does not belong to.
        """
        teams = await self.teams_of(owner)
        if asked:
            if asked not in teams:
                raise Forbidden(f"owner {owner!r} is not a member of team {asked!r}")
            return asked
        return teams[0] if teams else personal_space(owner)
