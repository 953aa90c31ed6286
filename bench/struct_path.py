"""The cheapest codex bridge CPython can run: the floor of the whole path under a struct rewrite.

`bench/bridge.py` runs it over the same exec as Cage's bridge. What it does with each read is
what a bridge rewritten around msgspec structs would do at its fastest, and less than Cage's
translator does:

* the lines of a read are decoded by msgspec in one call each 128 lines (`decode_lines`), straight
  into typed structs of codex's line types (no dict, no per-line Python call to parse);
* each line makes its events as msgspec structs shaped like Cage's events, and each 128 lines'
  events are encoded in one call (`encode_lines`).

Its JSONL is Cage's translator's for these lines byte for byte, `duration_ms` aside (a clock),
which `same_as_cage` checks before the bench trusts it. What it leaves out: lines of other types
(a real decoder falls back on them), the translator's checks and bookkeeping (tool ids seen
twice, usage across a resumed thread, error holding, redaction at stamping).

Batches stay at 128 lines: the events of a whole engine read (thousands) live long enough for
the garbage collector's older generations to walk them, and cost about twice as much CPU.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence

import msgspec

from runners.codex.items import one_line, unwrap_shell

BATCH_LINES = 128


# -- codex's lines, as `codex exec --json` prints them ---------------------------------------


class ErrorItem(msgspec.Struct, tag="error"):
    id: str
    message: str = ""


class CommandItem(msgspec.Struct, tag="command_execution"):
    id: str
    command: str
    aggregated_output: str = ""
    exit_code: int | None = None
    status: str = ""


class AgentMessageItem(msgspec.Struct, tag="agent_message"):
    id: str
    text: str = ""


class ThreadStarted(msgspec.Struct, tag="thread.started"):
    thread_id: str


class TurnStarted(msgspec.Struct, tag="turn.started"):
    pass


class ItemStarted(msgspec.Struct, tag="item.started"):
    item: ErrorItem | CommandItem | AgentMessageItem


class ItemCompleted(msgspec.Struct, tag="item.completed"):
    item: ErrorItem | CommandItem | AgentMessageItem


class CodexUsage(msgspec.Struct):
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0


class TurnCompleted(msgspec.Struct, tag="turn.completed"):
    usage: CodexUsage


Line = ThreadStarted | TurnStarted | ItemStarted | ItemCompleted | TurnCompleted


# -- Cage's events, as structs (fields in the protocol's order) ------------------------------


class Plain(msgspec.Struct):
    v: int
    seq: int
    ts: int
    session_id: str
    turn_id: str
    type: str
    props: object


class Delta(msgspec.Struct):
    v: int
    seq: int
    ts: int
    session_id: str
    turn_id: str
    message_id: str
    chunk_id: str
    delta: bool
    delta_action: str
    type: str
    props: object


class Raw(msgspec.Struct):
    event: str
    runner: str
    raw_type: str
    raw: dict[str, str]


class Start(msgspec.Struct):
    event: str
    message_id: str
    type: str


class Running(msgspec.Struct):
    tool_id: str
    tool: str
    input: dict[str, str]
    status: str
    summary: str
    runner: str


class Ran(msgspec.Struct):
    tool_id: str
    tool: str
    input: dict[str, str]
    output: str
    status: str
    is_error: bool
    exit_code: int | None
    summary: str
    runner: str


class End(msgspec.Struct):
    event: str
    message_id: str
    type: str
    status: str
    content: object
    duration_ms: int
    chunk_count: int


class Text(msgspec.Struct):
    content: str


class Usage(msgspec.Struct):
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    scope: str


class UsageEvent(msgspec.Struct):
    event: str
    usage: Usage


class Summary(msgspec.Struct):
    event: str
    result: str
    is_error: bool
    stop_reason: str
    usage: Usage
    runner_session_id: str


def _plain(props: object) -> Plain:
    return Plain(1, 0, 0, "", "", "event", props)


class StructCodex:
    """The events of one codex turn, made as structs."""

    def __init__(self, turn_id: str = "t") -> None:
        self._turn_id = turn_id
        self._texts = 0
        self._runs = 0
        self._chunks = 0
        self._thread = ""
        self._text: tuple[str, str, float] | None = None
        """The text message still open: its id, its content, when it started."""
        self._running: dict[str, tuple[str, Running, float]] = {}
        self._answer = ""
        self._decode = msgspec.json.Decoder(Line).decode_lines
        self._encode = msgspec.json.Encoder().encode_lines

    def take(self, items: Sequence[bytes]) -> int:
        """Decode, translate and encode `items` (lines without their newline); JSONL bytes made."""
        return sum(len(jsonl) for jsonl in self.jsonl(items))

    def jsonl(self, items: Sequence[bytes]) -> Iterator[bytes]:
        """The JSONL of `items`, one `bytes` each `BATCH_LINES` lines."""
        for start in range(0, len(items), BATCH_LINES):
            yield self._encode(self.translate(self._decode(b"\n".join(items[start : start + BATCH_LINES]))))

    def translate(self, lines: Iterable[Line]) -> list[Plain | Delta]:
        out: list[Plain | Delta] = []
        for line in lines:
            kind = type(line)
            if kind is ItemStarted or kind is ItemCompleted:
                item = line.item  # type: ignore[union-attr]
                if type(item) is CommandItem:
                    self._command(item, kind is ItemCompleted, out)
                elif type(item) is AgentMessageItem:
                    self._close_text(out)
                    self._texts += 1
                    self._chunks += 1
                    message = f"text-{self._texts}"
                    out.append(_plain(Start("message_start", message, "text")))
                    chunk, text = f"c-{self._chunks}", Text(item.text)
                    out.append(Delta(1, 0, 0, "", "", message, chunk, True, "append", "text", text))
                    self._text = (message, item.text, time.monotonic())
                    self._answer = item.text
                elif type(item) is ErrorItem and kind is ItemCompleted:
                    out.append(_plain(Raw("runner/raw", "codex", "warning", {"message": item.message})))
            elif kind is TurnCompleted:
                self._close_text(out)
                got = line.usage  # type: ignore[union-attr]
                usage = Usage(got.input_tokens, got.cached_input_tokens, got.output_tokens, 0, "turn")
                out.append(_plain(UsageEvent("token/usage", usage)))
                summary = Summary("result/summary", self._answer, False, "end_turn", usage, self._thread)
                out.append(_plain(summary))
            elif kind is ThreadStarted:
                self._thread = line.thread_id  # type: ignore[union-attr]
        return out

    def _command(self, item: CommandItem, completed: bool, out: list[Plain | Delta]) -> None:
        self._close_text(out)
        tool_id = f"{self._turn_id}:{item.id}"
        script = unwrap_shell(item.command)
        summary = one_line(script)
        held = self._running.pop(tool_id, None)
        if held is None:
            self._runs += 1
            message = f"execute-{self._runs}"
            running = Running(tool_id, "command_execution", {"command": script}, "running", summary, "codex")
            self._chunks += 1
            chunk = f"c-{self._chunks}"
            out.append(_plain(Start("message_start", message, "execute")))
            out.append(Delta(1, 0, 0, "", "", message, chunk, True, "merge", "execute", running))
            held = (message, running, time.monotonic())
        if not completed:
            self._running[tool_id] = held
            return
        message, running, started = held
        out.append(_plain(End("message_end", message, "execute", "completed", running, _ms(started), 1)))
        ran = Ran(
            tool_id,
            "command_execution",
            {"command": script},
            item.aggregated_output,
            "completed",
            item.exit_code not in (0, None),
            item.exit_code,
            summary,
            "codex",
        )
        self._chunks += 1
        now = time.monotonic()
        out.append(_plain(Start("message_start", message, "execute")))
        out.append(Delta(1, 0, 0, "", "", message, f"c-{self._chunks}", True, "merge", "execute", ran))
        out.append(_plain(End("message_end", message, "execute", "completed", ran, _ms(now), 1)))

    def _close_text(self, out: list[Plain | Delta]) -> None:
        if self._text is not None:
            message, content, started = self._text
            out.append(_plain(End("message_end", message, "text", "completed", content, _ms(started), 1)))
            self._text = None


def _ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)
