"""One websocket connection to a session: replay + live events out, control frames in.

Events come from `TurnService.subscribe(session_id, after_seq)`, which replays the durable log and
continues live with no gap and no duplicate; a `resume` frame restarts it from the seq the client
names. Turns run in the pipeline, not in the connection: a client that vanishes stops only its own
subscription. Sends are serialised by a lock, since the event forwarder and the frame loop share
the socket.
"""

from __future__ import annotations

import contextlib

import anyio
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from orchestrator.api.auth import Principal
from orchestrator.api.config import ApiConfig
from orchestrator.api.dependencies import authenticate, bearer_token
from orchestrator.api.errors import field_errors
from orchestrator.api.frames import (
    CancelFrame,
    ClientFrame,
    ClientFrameAdapter,
    InterruptFrame,
    PermissionResponseFrame,
    PingFrame,
    QuestionResponseFrame,
    ResumeFrame,
    SessionAccepted,
    SessionAck,
    SessionError,
    SessionInterrupting,
    SessionPong,
    SessionReady,
    UserMessageFrame,
)
from orchestrator.api.limits import MAX_SEQ, SESSION_ID
from orchestrator.api.ratelimit import RateLimiter
from orchestrator.api.state import ApiState
from orchestrator.dsl.locales import request_locale
from orchestrator.error_table import close_code, surfaces
from orchestrator.errors import CageError, Conflict, Forbidden, Unauthorized
from orchestrator.pipeline import InputMessage, TurnHandle, TurnOptions
from orchestrator.redaction import redact
from orchestrator.store import SessionRecord

log = structlog.get_logger(__name__)

_STILL_STARTING = (
    "a message of this connection is still waiting to start its turn in session {session!r}; "
    "interrupt it or wait for session.accepted"
)
_WITHDRAWN = "no turn was running: the user message waiting for a place on the server was withdrawn"


def error_frame(exc: CageError) -> SessionError:
    """The control frame telling a client why its frame was refused (its code: the error's kind's)."""
    return SessionError(code=surfaces(exc).ws_code, message=redact(str(exc)))


class SessionConnection:
    def __init__(
        self, websocket: WebSocket, session: SessionRecord, principal: Principal, state: ApiState
    ) -> None:
        self._ws = websocket
        self._session = session
        self._principal = principal
        self._state = state
        self._sessions = state.sessions
        self._turn_metrics = state.turn_metrics
        self._limiter = state.limiter
        self._resumes = RateLimiter(
            per_minute=state.config.resume_per_minute, burst=5, subject="resume frames on this websocket"
        )
        self._send_lock = anyio.Lock(fast_acquire=True)  # free but for a race: no loop turn per frame
        self._follower: anyio.CancelScope | None = None
        self._starting: anyio.CancelScope | None = None
        """The user message whose turn is starting: it may wait at a saturated server's door
        (`LoadGate`), and the connection reads frames meanwhile (pings, an interrupt withdrawing it)."""
        self._withdrawn_by_cancel = False
        """The frame that withdrew it was a `cancel` (force), not an `interrupt`."""
        self._tg: anyio.abc.TaskGroup | None = None

    async def run(self, after_seq: int | None) -> None:
        """Serve the connection until the client leaves."""
        start = self._session.last_seq if after_seq is None else after_seq
        running_turn_id = await self._sessions.running_turn_id(self._session.id)  # here or on a replica
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await self._send(
                SessionReady(
                    session_id=self._session.client_id,
                    assistant_id=self._session.assistant_id,
                    last_seq=self._session.last_seq,
                    after_seq=start,
                    running_turn_id=running_turn_id,
                )
            )
            self._follow(start)
            tg.start_soon(self._watch_key)
            try:
                await self._receive_frames()
            finally:
                tg.cancel_scope.cancel()

    async def _watch_key(self) -> None:
        """Close the connection within `revocation_check_interval` of its key being revoked."""
        while True:
            await anyio.sleep(self._state.config.revocation_check_interval)
            if not await self._state.auth.still_valid(self._principal):
                await self._revoked()
                return

    async def _revoked(self) -> None:
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            await self._send(SessionError(code="unauthorized", message="API key revoked"))
            await self._ws.close(code=close_code("unauthorized"))
        assert self._tg is not None
        self._tg.cancel_scope.cancel()

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
                async for event, text in self._sessions.subscribe_json(self._session, after_seq):
                    self._turn_metrics.saw(event)
                    async with self._send_lock:
                        await self._ws.send_text(text)  # a frame is an event's JSON, as WebSocketEncoder's
            except WebSocketDisconnect:
                assert self._tg is not None
                self._tg.cancel_scope.cancel()

    async def _send(self, frame: BaseModel) -> None:
        async with self._send_lock:
            await self._ws.send_text(frame.model_dump_json(exclude_none=True))

    async def _receive_frames(self) -> None:
        while True:
            try:
                message = await self._ws.receive()
            except (WebSocketDisconnect, RuntimeError):
                return
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                await self._send(
                    SessionError(code="unsupported", message="send JSON frames as text, not binary")
                )
                continue
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

    async def _start_turn(self, frame: UserMessageFrame, scope: anyio.CancelScope) -> None:
        """Start the message's turn and say how that went: `session.accepted`, or `session.error`
        (`turn_running`, `capacity`, ..., or `no_turn` when an interrupt withdrew it first)."""
        handle: TurnHandle | None = None
        refusal: SessionError | None = None
        language = self._ws.headers.get("accept-language")  # the handshake's: the turn's locale
        with scope:
            try:
                handle = await self._sessions.start(
                    self._session,
                    [InputMessage(role="user", content=frame.text)],
                    attachments=[a.attachment() for a in frame.attachments],
                    options=TurnOptions(locale=request_locale(None, language)) if language else None,
                )
            except Conflict as exc:
                refusal = SessionError(code="turn_running", message=redact(str(exc)))
            except CageError as exc:
                refusal = error_frame(exc)
        if self._starting is scope:
            self._starting = None
        if handle is not None:
            await self._send(SessionAccepted(turn_id=handle.turn_id, client_id=frame.client_id))
            if scope.cancel_called:  # withdrawn as its start returned: interrupt the turn instead
                force = self._withdrawn_by_cancel
                await handle.interrupt(force=force)
                await self._send(SessionInterrupting(turn_id=handle.turn_id, force=force))
        elif refusal is not None:
            await self._send(refusal)
        else:
            await self._send(SessionError(code="no_turn", message=_WITHDRAWN))

    async def _handle(self, frame: ClientFrame) -> None:
        match frame:
            case UserMessageFrame():
                if not await self._state.auth.still_valid(self._principal):
                    await self._revoked()
                    return
                await self._limiter.take(self._principal.key_id)
                if self._starting is not None:
                    raise Conflict(_STILL_STARTING.format(session=self._session.client_id))
                self._starting = anyio.CancelScope()
                assert self._tg is not None
                self._tg.start_soon(self._start_turn, frame, self._starting)
            case InterruptFrame() | CancelFrame():
                force = isinstance(frame, CancelFrame)
                if self._starting is not None:  # its turn has not started: the message is withdrawn
                    self._withdrawn_by_cancel = force
                    self._starting.cancel()
                    return
                interrupted = await self._sessions.interrupt(
                    self._principal, self._session.client_id, force=force
                )
                await self._send(SessionInterrupting(turn_id=interrupted.turn_id, force=force))
            case PermissionResponseFrame():
                await self._sessions.respond_permission(
                    self._principal, self._session.client_id, frame.request_id, frame.decision, frame.message
                )
                await self._send(SessionAck(of=frame.type))
            case QuestionResponseFrame():
                await self._sessions.respond_question(
                    self._principal, self._session.client_id, frame.request_id, frame.answer
                )
                await self._send(SessionAck(of=frame.type))
            case ResumeFrame():
                self._resumes.check("resume")  # each one replays the log from after_seq
                await self._send(SessionAck(of=frame.type))
                self._follow(frame.after_seq)
            case PingFrame():
                await self._send(SessionPong())


class SocketParams(BaseModel):
    """The websocket's path and query parameters, checked after the handshake (so that a bad one
    gets a frame naming it, not an HTTP 403 from the handshake)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    session_id: str = Field(pattern=SESSION_ID)
    assistant_id: str | None = Field(default=None, min_length=1, max_length=200)
    after_seq: int | None = Field(default=None, ge=0, le=MAX_SEQ)

    @classmethod
    def of(
        cls, session_id: str, assistant_id: str | None, after_seq: str | None
    ) -> SocketParams | list[dict[str, str]]:
        """The parameters, or the field errors (`loc`: `path.session_id`, `query.after_seq`, ...)."""
        try:
            return cls.model_validate(
                {"session_id": session_id, "assistant_id": assistant_id, "after_seq": after_seq}
            )
        except ValidationError as exc:
            errors = field_errors(exc.errors())
            for error in errors:
                error["loc"] = ("path." if error["loc"] == "session_id" else "query.") + error["loc"]
            return errors


def check_origin(origin: str | None, config: ApiConfig, host: str | None = None) -> None:
    """A browser page may drive a session only from an allowed origin (cross-site websocket
    hijacking); clients that are not browsers send no `Origin`. The server's own page (`/ui/`,
    same origin: the `Origin`'s host is the request's `Host`) is always allowed.

    Raises:
        Forbidden: an `Origin` neither this server's nor in `CAGE_ALLOWED_ORIGINS`.
    """
    if origin is None or (host is not None and origin.rstrip("/").split("://", 1)[-1] == host):
        return
    if origin.rstrip("/") not in {o.rstrip("/") for o in config.allowed_origins}:
        raise Forbidden(f"websocket origin {origin!r} is not allowed (CAGE_ALLOWED_ORIGINS)")


async def _principal(websocket: WebSocket, state: ApiState, ticket: str | None) -> Principal:
    if ticket is not None:
        principal = await state.tickets.redeem(ticket)
        if principal is None or not await state.auth.still_valid(principal):
            raise Unauthorized(
                "invalid, used or expired websocket ticket: get a new one (POST /v1/sessions/ws-ticket)"
            )
        return principal
    return await authenticate(state, bearer_token(websocket))


async def _refuse(websocket: WebSocket, frame: SessionError) -> None:
    await websocket.send_text(frame.model_dump_json(exclude_none=True))
    await websocket.close(code=close_code(frame.code))


async def serve_session(
    websocket: WebSocket, state: ApiState, params: SocketParams | list[dict[str, str]], ticket: str | None
) -> None:
    """Check the origin and the parameters, authenticate (header or ticket), open (or create) the
    session, then serve frames until the client leaves.

    A refused connection gets one `session.error` frame, then a close code 4400 + HTTP-like status
    (4400 with `fields` for a bad parameter, 4401, 4403, 4404, 4409, 4429).
    """
    await websocket.accept()
    if isinstance(params, list):
        detail = "; ".join(f"{f['loc']}: {f['msg']}" for f in params)
        await _refuse(websocket, SessionError(code="invalid", message=detail, fields=params))
        return
    try:
        check_origin(websocket.headers.get("origin"), state.config, websocket.headers.get("host"))
        principal = await _principal(websocket, state, ticket)
        session = await state.sessions.open(principal, params.session_id, params.assistant_id)
        if params.after_seq is not None and params.after_seq > session.last_seq:
            field = {"loc": "query.after_seq", "msg": f"is past the session's last_seq {session.last_seq}"}
            message = f"query.after_seq: {params.after_seq} is past the session's last_seq {session.last_seq}"
            await _refuse(websocket, SessionError(code="invalid", message=message, fields=[field]))
            return
        state.caps.take("websocket", principal.owner)
    except CageError as exc:
        await _refuse(websocket, error_frame(exc))
        return
    structlog.contextvars.bind_contextvars(session_id=session.id, owner=principal.owner)
    state.metrics.websocket_clients.inc()
    try:
        await SessionConnection(websocket, session, principal, state).run(params.after_seq)
    finally:
        state.caps.give_back("websocket", principal.owner)
        state.metrics.websocket_clients.dec()
