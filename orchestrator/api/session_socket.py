"""One websocket connection to a session: replay + live events out, control frames in.

Events come from `TurnService.subscribe(chat_id, after_seq)`, which replays the durable log and
continues live with no gap and no duplicate; a `resume` frame restarts it from the seq the client
names. Turns run in the pipeline, not in the connection: a client that vanishes stops only its own
subscription. Sends are serialised by a lock, since the event forwarder and the frame loop share
the socket.
"""

from __future__ import annotations

import anyio
import structlog
from pydantic import BaseModel, ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from orchestrator.api.auth import Principal
from orchestrator.api.conversations import Conversations
from orchestrator.api.dependencies import authenticate, bearer_token
from orchestrator.api.errors import field_errors, status_for
from orchestrator.api.frames import (
    CancelFrame,
    ClientFrame,
    ClientFrameAdapter,
    InterruptFrame,
    PermissionResponseFrame,
    PingFrame,
    ResumeFrame,
    SessionAccepted,
    SessionAck,
    SessionError,
    SessionInterrupting,
    SessionPong,
    SessionReady,
    UserMessageFrame,
)
from orchestrator.api.ratelimit import RateLimiter
from orchestrator.api.state import ApiState
from orchestrator.api.tracker import TurnTracker
from orchestrator.errors import CageError, CapacityError, Conflict
from orchestrator.pipeline import InputMessage
from orchestrator.redaction import redact
from orchestrator.store import ChatRecord
from orchestrator.stream import WebSocketEncoder

log = structlog.get_logger(__name__)

_CODES = {
    400: "invalid",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    422: "invalid",
    503: "unavailable",
}


def error_frame(exc: CageError) -> SessionError:
    """The control frame telling a client why its frame was refused."""
    status = status_for(exc)
    if isinstance(exc, CapacityError):
        code = "capacity"
    elif status == 429:
        code = "rate_limited"
    else:
        code = _CODES.get(status, "failed")
    return SessionError(code=code, message=redact(str(exc)))


class SessionSocket:
    def __init__(
        self,
        websocket: WebSocket,
        chat: ChatRecord,
        principal: Principal,
        conversations: Conversations,
        tracker: TurnTracker,
        limiter: RateLimiter,
    ) -> None:
        self._ws = websocket
        self._chat = chat
        self._principal = principal
        self._conversations = conversations
        self._tracker = tracker
        self._limiter = limiter
        self._encoder = WebSocketEncoder()
        self._send_lock = anyio.Lock()
        self._follower: anyio.CancelScope | None = None
        self._tg: anyio.abc.TaskGroup | None = None

    async def run(self, after_seq: int | None) -> None:
        """Serve the connection until the client leaves."""
        start = self._chat.last_seq if after_seq is None else after_seq
        running = self._conversations.running(self._chat.id)
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await self._send(
                SessionReady(
                    chat_id=self._chat.id,
                    assistant_id=self._chat.assistant_id,
                    last_seq=self._chat.last_seq,
                    after_seq=start,
                    running_turn_id=running.turn_id if running else None,
                )
            )
            self._follow(start)
            try:
                await self._receive_frames()
            finally:
                tg.cancel_scope.cancel()

    def _follow(self, after_seq: int) -> None:
        if self._follower is not None:
            self._follower.cancel()
        scope = anyio.CancelScope()
        self._follower = scope
        assert self._tg is not None
        self._tg.start_soon(self._forward, after_seq, scope)

    async def _forward(self, after_seq: int, scope: anyio.CancelScope) -> None:
        with scope:
            try:
                async for event in self._conversations.turns.subscribe(self._chat.id, after_seq=after_seq):
                    self._tracker.saw(event)
                    async with self._send_lock:
                        await self._ws.send_text(self._encoder.encode(event))
            except WebSocketDisconnect:
                assert self._tg is not None
                self._tg.cancel_scope.cancel()

    async def _send(self, frame: BaseModel) -> None:
        async with self._send_lock:
            await self._ws.send_text(frame.model_dump_json(exclude_none=True))

    async def _receive_frames(self) -> None:
        while True:
            try:
                text = await self._ws.receive_text()
            except WebSocketDisconnect:
                return
            try:
                frame = ClientFrameAdapter.validate_json(text)
            except ValidationError as exc:
                await self._send(
                    SessionError(code="bad_frame", message="invalid frame", fields=field_errors(exc.errors()))
                )
                continue
            try:
                await self._handle(frame)
            except Conflict as exc:
                code = "turn_running" if isinstance(frame, UserMessageFrame) else "conflict"
                await self._send(SessionError(code=code, message=redact(str(exc))))
            except CageError as exc:
                frame_error = error_frame(exc)
                if isinstance(frame, InterruptFrame | CancelFrame) and frame_error.code == "not_found":
                    frame_error = frame_error.model_copy(update={"code": "no_turn"})
                await self._send(frame_error)

    async def _handle(self, frame: ClientFrame) -> None:
        match frame:
            case UserMessageFrame():
                self._limiter.check(self._principal.key_id)
                handle = await self._conversations.start(
                    self._chat,
                    [InputMessage(role="user", content=frame.text)],
                    attachments=[a.attachment() for a in frame.attachments],
                )
                await self._send(SessionAccepted(turn_id=handle.turn_id, client_id=frame.client_id))
            case InterruptFrame() | CancelFrame():
                force = isinstance(frame, CancelFrame)
                handle = await self._conversations.interrupt(self._principal, self._chat.id, force=force)
                await self._send(SessionInterrupting(turn_id=handle.turn_id, force=force))
            case PermissionResponseFrame():
                await self._conversations.respond_permission(
                    self._principal, self._chat.id, frame.request_id, frame.decision, frame.message
                )
                await self._send(SessionAck(of=frame.type))
            case ResumeFrame():
                await self._send(SessionAck(of=frame.type))
                self._follow(frame.after_seq)
            case PingFrame():
                await self._send(SessionPong())


_CLOSE_CODES = {
    "unauthorized": 4401,
    "forbidden": 4403,
    "not_found": 4404,
    "conflict": 4409,
    "rate_limited": 4429,
    "invalid": 4400,
}


async def serve_session(
    websocket: WebSocket, state: ApiState, chat_id: str, assistant_id: str | None, after_seq: int | None
) -> None:
    """Authenticate, open (or create) the session, then serve frames until the client leaves.

    A refused connection gets one `session.error` frame, then a close code 4400 + HTTP-like status
    (4401, 4403, 4404, 4409, 4429).
    """
    await websocket.accept()
    try:
        principal = await authenticate(state, bearer_token(websocket))
        chat = await state.conversations.open(principal, chat_id, assistant_id)
    except CageError as exc:
        frame = error_frame(exc)
        await websocket.send_text(frame.model_dump_json(exclude_none=True))
        await websocket.close(code=_CLOSE_CODES.get(frame.code, 4500))
        return
    structlog.contextvars.bind_contextvars(chat_id=chat.id, owner=principal.owner)
    state.metrics.websocket_clients.inc()
    try:
        await SessionSocket(
            websocket, chat, principal, state.conversations, state.tracker, state.limiter
        ).run(after_seq)
    finally:
        state.metrics.websocket_clients.dec()
