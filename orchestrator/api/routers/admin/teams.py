"""Admin: teams. A key's owner belongs to the teams an admin puts it in; the `team` memory space
of its turns is one of them (never a team the request names for itself)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict

from orchestrator.api.dependencies import AdminDep, StoreDep
from orchestrator.store.teams import TEAM_ID

router = APIRouter(prefix="/v1/admin/teams", tags=["admin"])
TeamId = Annotated[str, Path(pattern=f"^{TEAM_ID.pattern}$")]
Owner = Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")]


class Team(BaseModel):
    model_config = ConfigDict(frozen=True)
    team: str
    members: list[str]


@router.get("", response_model=list[Team])
async def list_teams(principal: AdminDep, store: StoreDep) -> list[Team]:
    return [Team(team=name, members=members) for name, members in (await store.teams.all()).items()]


@router.get("/{team}", response_model=Team)
async def get_team(team: TeamId, principal: AdminDep, store: StoreDep) -> Team:
    return Team(team=team, members=await store.teams.members(team))


@router.put("/{team}/members/{owner}", response_model=Team)
async def add_member(team: TeamId, owner: Owner, principal: AdminDep, store: StoreDep) -> Team:
    if await store.teams.add(team, owner):
        await store.audit.record(principal.key_id, "team.add_member", team, {"owner": owner})
    return Team(team=team, members=await store.teams.members(team))


@router.delete("/{team}/members/{owner}", response_model=Team)
async def remove_member(team: TeamId, owner: Owner, principal: AdminDep, store: StoreDep) -> Team:
    if await store.teams.remove(team, owner):
        await store.audit.record(principal.key_id, "team.remove_member", team, {"owner": owner})
    return Team(team=team, members=await store.teams.members(team))
