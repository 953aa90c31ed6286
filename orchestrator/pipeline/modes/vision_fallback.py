"""Images for a model, and Yao's `uses.vision` fallback (LLM mode and the `yaocode` loop): when
the turn's connector has no image input, the `uses.vision` assistant (an LLM-mode assistant whose
connector has vision) describes each image and the model gets the description as text instead.

Without such an assistant, or when describing one image fails, the model gets the line
`orchestrator.llm.images.describe` gives (the image is named, never silently dropped). The
describer's own events stay out of the session; its turn is bounded by `DESCRIBE_TIMEOUT`.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import structlog

from orchestrator.dsl import AppLoader, Assistant, AssistantMode, ConnectorSpec
from orchestrator.dsl.agentconfig import Role
from orchestrator.errors import CageError
from orchestrator.llm import ModelRequest, TextDelta, client_for
from orchestrator.llm.connections import ModelConnections
from orchestrator.llm.images import describe, has_vision
from orchestrator.llm.messages import Block, ChatMessage, ImageBlock, TextBlock
from orchestrator.stream import Event, RandomIds, TurnBuilder
from runners.base import ImagePart

log = structlog.get_logger(__name__)
DESCRIBE_TIMEOUT = 120.0
"""Seconds one image description may take before the plain line is used instead."""
DESCRIBE_PROMPT = (
    "Describe this image for someone who cannot see it: what it shows, any text in it (verbatim), "
    "and details that matter for answering questions about it. Answer with the description only."
)


def vision_assistant_id(assistant: Assistant) -> str | None:
    """The assistant's `uses.vision` (merged over `agent.yml`'s) when it names an assistant."""
    value = assistant.uses.vision
    if not value or value.startswith("mcp:") or value == "builtin":
        return None
    return value


def _describer(loader: AppLoader, assistant_id: str) -> Assistant | None:
    """The describing assistant when it is LLM mode with vision (blocking: the loader reads files)."""
    from orchestrator.pipeline.modes.llm_turn import _connector_spec  # lazy: llm_turn imports us

    describer = loader.get(assistant_id)
    if describer.mode is not AssistantMode.LLM:
        return None
    return describer if has_vision(_connector_spec(loader, describer, None)) else None


async def _description(
    loader: AppLoader,
    describer: Assistant,
    block: ImageBlock,
    session_id: str,
    connections: ModelConnections | None,
) -> str | None:
    from orchestrator.pipeline.modes.llm_turn import LlmTurnInput, run_llm_turn  # lazy: llm_turn imports us

    inp = LlmTurnInput(
        assistant=describer,
        messages=(ChatMessage(role="user", content=(TextBlock(text=DESCRIBE_PROMPT), block)),),
        session_id=f"{session_id}/vision",
    )

    async def drop(_: Sequence[Event]) -> None:
        return None

    with anyio.move_on_after(DESCRIBE_TIMEOUT):
        result = await run_llm_turn(
            inp, loader=loader, builder=TurnBuilder(RandomIds()), emit=drop, connections=connections
        )
        if result.error is None and result.content.strip():
            return result.content.strip()
        log.info("vision.failed", assistant=describer.id, error=result.error)
        return None
    log.info("vision.timed_out", assistant=describer.id)
    return None


async def _connector_description(
    connector: ConnectorSpec, block: ImageBlock, connections: ModelConnections | None
) -> str | None:
    """One model call to a vision connector (the native loop's `runner.connectors.vision`)."""
    client = client_for(connector, connections)
    request = ModelRequest(
        messages=(ChatMessage(role="user", content=(TextBlock(text=DESCRIBE_PROMPT), block)),),
        max_tokens=1024,
    )
    parts: list[str] = []
    try:
        with anyio.move_on_after(DESCRIBE_TIMEOUT):
            async for delta in client.stream(request):
                if isinstance(delta, TextDelta):
                    parts.append(delta.text)
            return "".join(parts).strip() or None
        log.info("vision.timed_out", connector=connector.id)
        return None
    except CageError as exc:
        log.info("vision.failed", connector=connector.id, error=str(exc))
        return None
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()


async def with_descriptions(
    messages: Sequence[ChatMessage],
    assistant: Assistant,
    loader: AppLoader,
    *,
    session_id: str = "",
    vision: ConnectorSpec | None = None,
    connections: ModelConnections | None = None,
) -> list[ChatMessage]:
    """`messages` with every image replaced by text: a description of it (by the `vision`
    connector when given and it has vision, else by the `uses.vision` assistant), or the line
    naming it (nothing can describe it, or describing it failed). Model calls go over `connections`
    (the pipeline's) when given."""
    describer: Assistant | None = None
    by_role = vision if vision is not None and has_vision(vision) else None
    wanted = vision_assistant_id(assistant)
    if by_role is None and wanted is not None and wanted != assistant.id:
        try:
            describer = await anyio.to_thread.run_sync(_describer, loader, wanted)
        except CageError as exc:
            log.info("vision.unavailable", assistant=wanted, error=str(exc))
    out: list[ChatMessage] = []
    for message in messages:
        if not any(isinstance(b, ImageBlock) for b in message.content):
            out.append(message)
            continue
        blocks: list[Block] = []
        for block in message.content:
            if not isinstance(block, ImageBlock):
                blocks.append(block)
                continue
            text, by = None, ""
            if by_role is not None:
                by = f"connector {by_role.id}"
                text = await _connector_description(by_role, block, connections)
            elif describer is not None:
                by = describer.id
                text = await _description(loader, describer, block, session_id, connections)
            what = block.name or block.url or block.media_type
            blocks.append(
                TextBlock(text=f"[image {what}, described by {by}: {text}]")
                if text is not None
                else TextBlock(text=describe(block))
            )
        out.append(message.model_copy(update={"content": tuple(blocks)}))
    return out


async def native_prompt(
    prompt: str,
    images: Sequence[ImagePart],
    *,
    connector: ConnectorSpec,
    assistant: Assistant,
    loader: AppLoader,
    session_id: str = "",
    vision: ConnectorSpec | None = None,
    connections: ModelConnections | None = None,
) -> ChatMessage:
    """The native loop's user message: the prompt with the attached images as image parts for a
    connector with vision, else with each image described (`with_descriptions`; `vision` is the
    runner's `vision` role connector)."""
    message = ChatMessage.user(prompt)
    if not images:
        return message
    blocks = tuple(ImageBlock(media_type=i.media_type, data=i.data, name=i.name) for i in images)
    message = message.model_copy(update={"content": (*message.content, *blocks)})
    if has_vision(connector):
        return message
    [described] = await with_descriptions(
        [message], assistant, loader, session_id=session_id, vision=vision, connections=connections
    )
    return described


def role_connector(assistant: Assistant, loader: AppLoader, role: Role) -> ConnectorSpec | None:
    """The connector of `runner.connectors.<role>` (the loader keeps only roles the runner uses;
    blocking: the loader may read files)."""
    choice = assistant.sandbox.runner.connectors.get(role) if assistant.sandbox else None
    return loader.connector(choice.connector) if choice is not None else None
