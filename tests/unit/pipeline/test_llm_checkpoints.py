"""LLM mode's checkpoints on the real store (SQLite and Postgres): tool rounds are saved, the end
drops them (with the resumed turn's), only a crashed turn of the same assistant is resumed, and
the resumed conversation gets the new prompt once."""

from __future__ import annotations

from orchestrator.llm import ChatMessage, Checkpoint, ToolCallBlock, ToolResultBlock
from orchestrator.pipeline.modes.llm_checkpoints import StoreCheckpoints, crashed_checkpoint
from orchestrator.pipeline.modes.llm_turn import _new_prompts
from orchestrator.pipeline.recovery import RESTARTED, close_unfinished_turns
from orchestrator.store import Store
from orchestrator.store.retention import RetentionPolicy
from orchestrator.stream import ErrorEvent, Usage

PROMPT = ChatMessage.user("add 2 and 3")
CALL = ChatMessage(role="assistant", content=(ToolCallBlock(id="c1", name="calc__add", arguments={"a": 2}),))
RESULT = ChatMessage(role="user", content=(ToolResultBlock(call_id="c1", output="5"),))


def checkpoint(turn_id: str, round: int, phase: str, *messages: ChatMessage) -> Checkpoint:
    return Checkpoint.model_validate(
        {
            "session_id": "s1",
            "turn_id": turn_id,
            "round": round,
            "phase": phase,
            "messages": messages,
            "usage": Usage(scope="turn"),
        }
    )


async def test_tool_rounds_are_saved_and_the_end_drops_them(store: Store) -> None:
    sink = StoreCheckpoints(store, resumed_from="t-old")
    await store.checkpoints.save("t-old", 1, {"any": 1})
    await sink.save(checkpoint("t1", 1, "model", PROMPT, CALL))
    assert await store.checkpoints.latest("t1") is None  # a model step alone is not kept
    await sink.save(checkpoint("t1", 1, "tools", PROMPT, CALL, RESULT))
    saved = await store.checkpoints.latest("t1")
    assert saved is not None and saved.round == 1
    assert Checkpoint.model_validate(saved.payload).messages == (PROMPT, CALL, RESULT)
    await sink.save(checkpoint("t1", 1, "done", PROMPT, CALL, RESULT))
    assert await store.checkpoints.of_turn("t1") == []
    assert await store.checkpoints.of_turn("t-old") == []


async def test_only_a_crashed_turn_of_the_same_assistant_is_resumed(store: Store) -> None:
    await store.sessions.create("alice", "llm.a", session_id="chat-1")
    await store.turns.begin("chat-1", "t1", "llm.a", ())
    await StoreCheckpoints(store).save(checkpoint("t1", 1, "tools", PROMPT, CALL, RESULT))
    assert await crashed_checkpoint(store, "chat-1", "t2", "llm.a") is None  # t1 still running

    [closed] = await close_unfinished_turns(store)
    assert closed.turn_id == "t1"
    [error] = [e for e in await store.events.of_turn("chat-1", "t1") if isinstance(e, ErrorEvent)]
    assert (error.props.code, error.props.details) == (RESTARTED, {"resume_round": 1})

    found = await crashed_checkpoint(store, "chat-1", "t2", "llm.a")
    assert found is not None and (found.turn_id, found.messages) == ("t1", (PROMPT, CALL, RESULT))
    assert await crashed_checkpoint(store, "chat-1", "t2", "llm.other") is None


def test_the_resumed_conversation_gets_the_new_prompt_once() -> None:
    again = ChatMessage.user("go on")
    # the stored history holds the crashed turn's prompt, then the new one
    assert _new_prompts([PROMPT, again], [PROMPT, CALL, RESULT]) == [again]
    assert _new_prompts([again], [PROMPT, CALL, RESULT]) == [again]  # history skipped


async def test_a_deleted_or_expired_session_takes_its_checkpoints_along(store: Store) -> None:
    for session in ("gone", "kept"):
        await store.sessions.create("alice", "llm.a", session_id=session)
        await store.turns.begin(session, f"turn-{session}", "llm.a", ())
        await store.checkpoints.save(f"turn-{session}", 1, {"messages": []})
    assert await store.sessions.delete("gone")
    assert await store.checkpoints.of_turn("turn-gone") == []  # at once, with the session
    await store.checkpoints.save("turn-none", 1, {"messages": []})  # its turn is gone
    swept = await store.retention.sweep(RetentionPolicy())
    assert swept.checkpoints == 1
    assert await store.checkpoints.of_turn("turn-none") == []
    assert len(await store.checkpoints.of_turn("turn-kept")) == 1  # its turn is still there
