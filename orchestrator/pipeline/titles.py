"""Session titles: after a session's first completed turn, its `uses.title` assistant (Yao's default
`__yao.title`, a light-model prompt) names the session from that exchange; the title is stored on the
session (`GET /v1/sessions/{id}` shows it) and never changes afterwards.

The job runs in the background after the turn has ended, bounded by `TITLE_TIMEOUT`; whatever goes
wrong (no light or default connector, a model error, a timeout) is logged and leaves the session
untitled: a title never fails or delays a turn. `uses.title` may name any LLM-mode assistant;
`system.title` in `agent.yml` picks the connector (Yao's per-agent override); a Create hook's
`uses.title` wins for its turn. A session that already has a title, or a sub-agent's child session, is
left alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import structlog

from orchestrator.dsl import AppLoader, Assistant, AssistantMode
from orchestrator.errors import CageError
from orchestrator.llm.connections import ModelConnections
from orchestrator.pipeline.options import CallOptions
from orchestrator.store import Store
from orchestrator.stream import Event, RandomIds, TurnBuilder

log = structlog.get_logger(__name__)
TITLE_TIMEOUT = 60.0
"""Seconds a title job may take before it is given up."""
MAX_TITLE = 120
MAX_EXCHANGE = 4000
"""Characters of the question and of the answer the title assistant is shown."""


def title_assistant_id(assistant: Assistant, options: CallOptions) -> str | None:
    """The assistant that names sessions for this turn: the hook's `uses.title`, else the assistant's
    (merged over `agent.yml`'s); None when there is none or it is not an assistant id."""
    asked = (options.uses or {}).get("title")
    value = asked if isinstance(asked, str) and asked else assistant.uses.title
    if not value or value.startswith("mcp:") or value == "builtin":
        return None
    return value


def clean_title(text: str) -> str:
    """The model's answer as a title: its first non-empty line, unquoted, at most `MAX_TITLE`."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    line = line.strip("\"'`*# ").rstrip(".")
    return line[:MAX_TITLE].strip()


async def make_title(
    store: Store,
    loader: AppLoader,
    *,
    session_id: str,
    title_id: str,
    question: str,
    answer: str,
    connections: ModelConnections | None = None,
    stop: anyio.Event | None = None,
) -> str | None:
    """Name the session from its first exchange, unless it has a title; the title, or None.

    `stop` ends the job between its steps (a database call is never cut in the middle, which
    would leave its connection to the garbage collector)."""
    stop = stop or anyio.Event()
    from orchestrator.pipeline.modes.llm_turn import LlmTurnInput, run_llm_turn  # lazy: the model SDKs

    session = await store.sessions.get(session_id)
    if session is None or session.title or session.parent_id is not None or stop.is_set():
        return None
    try:
        titler: Assistant = await anyio.to_thread.run_sync(loader.get, title_id)
    except CageError as exc:
        log.info("titles.unavailable", session_id=session_id, assistant=title_id, error=str(exc))
        return None
    if titler.mode is not AssistantMode.LLM:
        log.info("titles.not_llm", session_id=session_id, assistant=title_id)
        return None
    exchange = f"User:\n{question[:MAX_EXCHANGE]}\n\nAssistant:\n{answer[:MAX_EXCHANGE]}"
    inp = LlmTurnInput(
        assistant=titler,
        messages=({"role": "user", "content": exchange},),
        connector=loader.agent_config.system.title or None,
        session_id=f"{session_id}/title",
    )

    async def drop(_: Sequence[Event]) -> None:  # the title's own events stay out of the session
        return None

    content: str = ""
    error: str | None = "timed out"
    with anyio.move_on_after(TITLE_TIMEOUT):
        result = await run_llm_turn(
            inp,
            loader=loader,
            builder=TurnBuilder(RandomIds()),
            emit=drop,
            cancel=stop,
            connections=connections,
        )
        content, error = result.content, result.error
    if stop.is_set():
        return None
    if error is not None:
        log.info("titles.failed", session_id=session_id, assistant=title_id, error=error)
        return None
    title = clean_title(content)
    if not title:
        return None
    current = await store.sessions.get(session_id)
    if current is None or current.title:
        return None
    await store.sessions.update(session_id, title=title)
    log.info("titles.set", session_id=session_id, assistant=title_id)
    return title
