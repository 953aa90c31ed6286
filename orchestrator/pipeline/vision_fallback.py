"""Images for a model, and Yao's `uses.vision` fallback (LLM mode and the `yaocode` loop): when
the turn's connector has no image input, the `uses.vision` assistant (an LLM-mode assistant whose
connector has vision) describes each image and the model gets the description as text instead.

Without such an assistant, or when describing one image fails, the model gets the line
`orchestrator.llm.images.describe` gives (the image is named, never silently dropped). The
describer's own events stay out of the chat; its turn is bounded by `DESCRIBE_TIMEOUT`.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import structlog

from orchestrator.dsl import AppLoader, Assistant, AssistantMode, ConnectorSpec
from orchestrator.errors import CageError
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
    from orchestrator.pipeline.llm_turn import _connector_spec  # lazy: llm_turn imports us

    describer = loader.get(assistant_id)
    if describer.mode is not AssistantMode.LLM:
        return None
    return describer if has_vision(_connector_spec(loader, describer, None)) else None


async def _description(
    loader: AppLoader, describer: Assistant, block: ImageBlock, session_id: str
) -> str | None:
    from orchestrator.pipeline.llm_turn import LlmTurnInput, run_llm_turn  # lazy: llm_turn imports us

    inp = LlmTurnInput(
        assistant=describer,
        messages=(ChatMessage(role="user", content=(TextBlock(text=DESCRIBE_PROMPT), block)),),
        session_id=f"{session_id}/vision",
    )

    async def drop(_: Sequence[Event]) -> None:
        return None

    with anyio.move_on_after(DESCRIBE_TIMEOUT):
        result = await run_llm_turn(inp, loader=loader, builder=TurnBuilder(RandomIds()), emit=drop)
        if result.error is None and result.content.strip():
            return result.content.strip()
        log.info("vision.failed", assistant=describer.id, error=result.error)
        return None
    log.info("vision.timed_out", assistant=describer.id)
    return None


async def with_descriptions(
    messages: Sequence[ChatMessage], assistant: Assistant, loader: AppLoader, *, session_id: str = ""
) -> list[ChatMessage]:
    """`messages` with every image replaced by text: the `uses.vision` assistant's description of
    it, or the line naming it (no usable vision assistant, or describing it failed)."""
    describer: Assistant | None = None
    wanted = vision_assistant_id(assistant)
    if wanted is not None and wanted != assistant.id:
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
            text = None
            if describer is not None:
                text = await _description(loader, describer, block, session_id)
            what = block.name or block.url or block.media_type
            blocks.append(
                TextBlock(text=f"[image {what}, described by {describer.id}: {text}]")
                if text is not None and describer is not None
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
) -> ChatMessage:
    """The native loop's user message: the prompt with the attached images as image parts for a
    connector with vision, else with each image described (`with_descriptions`)."""
    message = ChatMessage.user(prompt)
    if not images:
        return message
    blocks = tuple(ImageBlock(media_type=i.media_type, data=i.data, name=i.name) for i in images)
    message = message.model_copy(update={"content": (*message.content, *blocks)})
    if has_vision(connector):
        return message
    [described] = await with_descriptions([message], assistant, loader, session_id=session_id)
    return described
