"""Pure-hook example: `create` answers the user itself through `ctx.send`, no model involved.

Hooks (sync or async; sync ones run in a worker thread, where `ctx` methods return results
instead of awaitables):

* `create(ctx, messages, options)` may return `{"messages": [...]}`, option overrides
  (`connector`, `temperature`, `max_tokens`, `prompt_preset`, `disable_global_prompts`,
  `mcp_servers`, `locale`, `metadata`, `uses`) or `{"delegate": {"agent_id", "messages"?,
  "options"?}}`, which hands the turn to another assistant without calling the model.
  `locale` picks the turn's prompt translations (`locales/<lang>.yml`); of `uses`, only
  `uses.title` is read (the session's title assistant). `connector`, `temperature`, `max_tokens`,
  `prompt_preset`, `disable_global_prompts` (drops `agent/prompts.yml`) and `mcp_servers` shape an
  LLM-mode turn; a sandbox assistant's runner takes its own from `package.yao` and `sandbox.yao`.
  Yao's `search`, `force_uses`, `audio`, `theme` and `route` are accepted and reported in a
  `hook/ignored` event.
* `next(ctx, payload, options)` gets `payload = {messages, completion, tools, error}`
  (`completion` is None in pure-hook mode) and may return `{"delegate": ...}` or `{"data": ...}`.

`ctx`: `send(text | {"type", "props"})`; `memory.user|team|session|context` with
`get/set(key, value, ttl=None)/delete/has/keys` (`context` ends with the turn);
`agent.call(id, messages, options)` and `agent.all|any|race([{agent_id, messages, options}])`,
returning `{agent_id, content, response, error}`; `sandbox.exec/read_file/write_file` when the
assistant has a sandbox; `assistant_id`, `owner`, `session_id`, `turn_id`, `thread_id`, `metadata`,
`locale`. An exception in a hook becomes an `error` event naming the assistant and the hook.
"""

from __future__ import annotations

from typing import Any


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
    """Echo the last user message back, in upper case."""
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    text = str(last.get("content", "")) if last else ""
    await ctx.send({"type": "text", "props": {"content": f"You said: {text.upper()}"}})
    return {}
