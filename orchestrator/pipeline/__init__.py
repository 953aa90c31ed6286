"""The turn pipeline: stages, hooks, delegation, agent-to-agent calls, memory, persistence.

The API and the CLI use `PipelineService` (a `TurnService`) and the contract models; import them
from here.
"""

from orchestrator.pipeline.call_result import CallResult
from orchestrator.pipeline.callstack import CallStack
from orchestrator.pipeline.contract import (
    Admit,
    Attachment,
    ClientOptions,
    InputMessage,
    Release,
    TurnHandle,
    TurnInput,
    TurnOptions,
    TurnService,
    new_session_id,
    new_turn_id,
)
from orchestrator.pipeline.handle import RunningTurn
from orchestrator.pipeline.hooks.modules import HookModules
from orchestrator.pipeline.hub import SessionHub
from orchestrator.pipeline.permission_answers import PermissionAnswer
from orchestrator.pipeline.resume import SessionResumeStore
from orchestrator.pipeline.service import PipelineService, turn_tasks

__all__ = [
    "Admit",
    "Attachment",
    "CallResult",
    "CallStack",
    "ClientOptions",
    "HookModules",
    "InputMessage",
    "PermissionAnswer",
    "PipelineService",
    "Release",
    "RunningTurn",
    "SessionHub",
    "SessionResumeStore",
    "TurnHandle",
    "TurnInput",
    "TurnOptions",
    "TurnService",
    "new_session_id",
    "new_turn_id",
    "turn_tasks",
]
