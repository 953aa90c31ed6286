"""The Markdown digest of a failed LLM-mode attempt, written for the fallback assistant.

Yao hands a failed or exhausted tool loop to `__yao.loop_fallback` with "a Markdown digest of the
system prompts, the conversation and the tool results". The digest is bounded (each piece cut at
2,000 characters, the last 40 messages) and secrets are masked.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from orchestrator.llm.messages import ChatMessage, TextBlock, ToolCallBlock, ToolResultBlock
from orchestrator.redaction import redact

PIECE_CHARS = 2000
MAX_MESSAGES = 40


def _cut(text: str, limit: int = PIECE_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f" … [{len(text) - limit} more characters]"


def _fenced(text: str) -> str:
    fence = "````" if "```" in text else "```"
    return f"{fence}\n{_cut(text)}\n{fence}"


def handoff_digest(assistant: str, system: str, messages: Sequence[ChatMessage], reason: str) -> str:
    """Markdown: who stopped and why, the system prompt, the conversation, and each tool result.

    `assistant` names the assistant that stopped (e.g. `'Calc' (`tests.calc`)`); `messages` is
    the loop's whole history (prompt, tool calls, tool results).
    """
    calls = {call.id: call for message in messages for call in message.tool_calls}
    lines = [
        f"# Hand-off from assistant {assistant}",
        "",
        f"The previous attempt stopped: {reason}.",
        "",
        "## System prompt",
        "",
        _fenced(system) if system.strip() else "_(none)_",
        "",
        "## Conversation",
        "",
    ]
    shown = list(messages)[-MAX_MESSAGES:]
    if len(shown) < len(messages):
        lines += [f"_({len(messages) - len(shown)} earlier messages left out)_", ""]
    for message in shown:
        lines += _message_lines(message, calls)
    lines += ["## Tool results", ""]
    results = [block for message in messages for block in message.tool_results]
    if not results:
        lines.append("_(no tool ran)_")
    for n, block in enumerate(results, start=1):
        call = calls.get(block.call_id)
        name = call.name if call is not None else block.call_id
        first = block.output.strip().splitlines()[0] if block.output.strip() else "(no output)"
        lines.append(f"{n}. `{name}` — {'error' if block.is_error else 'ok'}: {_cut(first, 300)}")
    return redact("\n".join(lines) + "\n")


def _message_lines(message: ChatMessage, calls: dict[str, ToolCallBlock]) -> list[str]:
    out: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock) and block.text.strip():
            who = "User" if message.role == "user" else "Assistant"
            out += [f"**{who}:**", "", _cut(block.text), ""]
        elif isinstance(block, ToolCallBlock):
            args = json.dumps(block.arguments, ensure_ascii=False, sort_keys=True)
            out += [f"**Assistant called** `{block.name}` with `{_cut(args, 500)}`", ""]
        elif isinstance(block, ToolResultBlock):
            call = calls.get(block.call_id)
            name = call.name if call is not None else block.call_id
            label = "error" if block.is_error else "result"
            out += [f"**Tool {label}** (`{name}`):", "", _fenced(block.output), ""]
    return out
