"""The id mapping in `orchestrator.api.sessions`: what leaves for a client carries its id."""

from __future__ import annotations

from datetime import UTC, datetime

from orchestrator.api.sessions import SessionView, client_json, for_client, for_client_one
from orchestrator.store import SessionRecord
from orchestrator.store.sessions import internal_session_id
from orchestrator.stream import LifecycleEvent, StreamStart, TextEvent, TextProps, WebSocketEncoder

WHEN = datetime(2026, 12, 1, tzinfo=UTC)


def session(owner: str, client_id: str, internal: str | None = None) -> SessionRecord:
    return SessionRecord(
        id=internal or internal_session_id(owner, client_id),
        owner=owner,
        client_id=client_id,
        assistant_id="tests.echo",
        title="",
        created_at=WHEN,
        updated_at=WHEN,
        last_seq=2,
        metadata={},
        resume={},
    )


def test_events_carry_the_client_id_wherever_the_internal_one_was() -> None:
    mine = session("alice", "shared")
    start = LifecycleEvent(
        seq=1, ts=1, session_id=mine.id, turn_id="t", props=StreamStart(assistant_id="a", chat_id=mine.id)
    )
    text = TextEvent(
        seq=2, ts=2, session_id=mine.id, turn_id="t", props=TextProps(content=f"{mine.id}/agent-1")
    )
    shown = for_client(mine, [start, text])
    assert [e.session_id for e in shown] == ["shared", "shared"]
    assert isinstance(shown[0], LifecycleEvent) and isinstance(shown[0].props, StreamStart)
    assert shown[0].props.chat_id == "shared"
    assert isinstance(shown[1], TextEvent) and shown[1].props.content == "shared/agent-1"
    assert [(e.seq, e.turn_id) for e in shown] == [(1, "t"), (2, "t")]


def test_a_websocket_frame_is_the_client_events_json_encoded_once() -> None:
    encoder = WebSocketEncoder()
    for record in (session("alice", "shared"), session("alice", "legacy", internal="legacy")):
        start = LifecycleEvent(
            seq=1,
            ts=1,
            session_id=record.id,
            turn_id="t",
            props=StreamStart(assistant_id="a", chat_id=record.id),
        )
        plain = TextEvent(seq=2, ts=2, session_id=record.id, turn_id="t", props=TextProps(content="hi é"))
        inside = TextEvent(
            seq=3, ts=3, session_id=record.id, turn_id="t", props=TextProps(content=f"{record.id}/x")
        )
        for event in (start, plain, inside):
            assert client_json(record, event) == encoder.encode(for_client_one(record, event))


def test_a_session_whose_ids_agree_passes_events_through_unchanged() -> None:
    old = session("alice", "legacy", internal="legacy")  # made before ids were per owner
    text = TextEvent(seq=1, ts=1, session_id="legacy", turn_id="t", props=TextProps(content="hi"))
    assert for_client_one(old, text) is text


def test_the_session_view_shows_the_client_id_and_the_owner() -> None:
    view = SessionView.of(session("bob", "shared"))
    assert (view.id, view.owner) == ("shared", "bob")
