"""Context compaction: when the history passes a token budget, the oldest part is summarised
with one model call and the latest part is kept word for word.

What is kept: the latest turn (from its prompt on). When the current turn alone is too big, its
prompt and its last `keep_rounds` rounds are kept and the rounds between are summarised. The
summary is put in front of the first kept prompt, so roles still alternate for every provider.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from orchestrator.attribute_docs import describe_fields
from orchestrator.llm.client import ModelClient
from orchestrator.llm.deltas import TextDelta, UsageDelta
from orchestrator.llm.messages import (
    ChatMessage,
    ModelRequest,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from orchestrator.stream import Usage

SUMMARY_SYSTEM = (
    "You compress an agent's working history. Summarise the transcript you are given: the user's "
    "goals, decisions taken, files read or changed, commands run and their outcomes, and what is "
    "still open. Be concise and concrete; keep paths, names and numbers exact."
)
_RESULT_CHARS = 2000


def estimate_tokens(system: str, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()) -> int:
    """A provider-neutral estimate: four characters of JSON per token."""
    size = len(system) + sum(len(m.model_dump_json()) for m in messages)
    size += sum(len(json.dumps(t.input_schema)) + len(t.description) for t in tools)
    return (size + 3) // 4


class CompactionPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)
    budget_tokens: int
    """Compact before a model call whose estimated input passes this many tokens."""
    keep_rounds: int = 2
    """Rounds of the current turn kept intact when the turn itself must be compacted."""
    summary_max_tokens: int = 1024


class Compaction(BaseModel):
    model_config = ConfigDict(frozen=True)
    messages: tuple[ChatMessage, ...]
    summary: str
    removed: int
    """How many messages the summary replaced."""
    usage: Usage


def _render(messages: Sequence[ChatMessage]) -> str:
    lines: list[str] = []
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock) and block.text:
                lines.append(f"{message.role.capitalize()}: {block.text}")
            elif isinstance(block, ToolCallBlock):
                lines.append(f"Assistant called {block.name} {json.dumps(block.arguments)}")
            elif isinstance(block, ToolResultBlock):
                output = block.output[:_RESULT_CHARS]
                flag = " (error)" if block.is_error else ""
                lines.append(f"Tool result{flag}: {output}")
            elif isinstance(block, ThinkingBlock):
                continue  # private reasoning is not worth the summary's budget
    return "\n".join(lines)


def split(messages: Sequence[ChatMessage], keep_rounds: int) -> tuple[int, int] | None:
    """(start, end) of the slice to summarise, or None when nothing can be dropped."""
    prompts = [i for i, m in enumerate(messages) if m.is_prompt]
    if not prompts:
        return None
    last = prompts[-1]
    if last > 0:
        return 0, last
    assistants = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if len(assistants) <= keep_rounds:
        return None
    cut = assistants[-keep_rounds] if keep_rounds > 0 else len(messages)
    return (1, cut) if cut > 1 else None


class Compactor:
    """Decides when to compact and does it with one model call (no tools offered)."""

    def __init__(self, client: ModelClient, policy: CompactionPolicy) -> None:
        self._client = client
        self.policy = policy

    def needed(self, system: str, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> bool:
        return estimate_tokens(system, messages, tools) > self.policy.budget_tokens

    async def compact(self, messages: Sequence[ChatMessage]) -> Compaction | None:
        """The compacted history, or None when there is nothing old enough to summarise.

        Raises:
            ModelError: the summary call failed.
        """
        bounds = split(messages, self.policy.keep_rounds)
        if bounds is None:
            return None
        start, end = bounds
        old = messages[start:end]
        request = ModelRequest(
            system=SUMMARY_SYSTEM,
            messages=(ChatMessage.user("Summarise this transcript:\n\n" + _render(old)),),
            max_tokens=self.policy.summary_max_tokens,
        )
        parts: list[str] = []
        usage = Usage()
        async for delta in self._client.stream(request):
            if isinstance(delta, TextDelta):
                parts.append(delta.text)
            elif isinstance(delta, UsageDelta):
                usage = delta.usage
        summary = "".join(parts).strip() or "(no summary)"
        note = TextBlock(text=f"<summary of the earlier conversation>\n{summary}\n</summary>")
        head = messages[:start]
        if start == 0:  # whole earlier turns went: the summary leads the latest prompt
            first = messages[end]
            kept = (first.model_copy(update={"content": (note, *first.content)}), *messages[end + 1 :])
        else:  # rounds inside the turn went: the summary follows the turn's prompt
            prompt = messages[0]
            kept = (prompt.model_copy(update={"content": (*prompt.content, note)}), *messages[end:])
            head = ()
        return Compaction(messages=(*head, *kept), summary=summary, removed=len(old), usage=usage)
