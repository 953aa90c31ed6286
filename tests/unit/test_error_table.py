"""One table maps an error's kind to its HTTP status, websocket codes and CLI exit code; no other
module maps errors to numbers, and the docs list every code."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from starlette.requests import Request

from orchestrator.api.caps import OwnerCapReached
from orchestrator.api.errors import KeyRateLimited, cage_error_handler
from orchestrator.api.gate import BodyTooLarge
from orchestrator.error_table import (
    EVENT_CODE_KINDS,
    KIND_MEANING,
    TABLE,
    ExitCode,
    all_error_classes,
    close_code,
    event_kind,
    surfaces,
    turn_exit_code,
)
from orchestrator.errors import (
    CageError,
    CallDepthError,
    CapacityError,
    ConfigError,
    Conflict,
    EngineUnavailable,
    ErrorKind,
    Forbidden,
    HookError,
    ImageBuildError,
    ModelError,
    NotFound,
    PrepareError,
    ProtocolError,
    RunnerError,
    SandboxError,
    SandboxNotFound,
    ToolError,
    Unauthorized,
    UsageError,
    WorkspaceError,
)
from orchestrator.gateway.server import GatewayError
from orchestrator.pipeline.load_gate import Overloaded
from orchestrator.store import RecordNotFound, StoreError

REPO = Path(__file__).resolve().parents[2]


def test_every_kind_has_a_row_and_a_meaning() -> None:
    assert set(TABLE) == set(ErrorKind) == set(KIND_MEANING)


def test_a_websocket_code_has_one_close_code_and_close_codes_follow_the_status() -> None:
    by_ws: dict[str, set[int]] = {}
    for row in TABLE.values():
        by_ws.setdefault(row.ws_code, set()).add(row.close_code)
        assert row.close_code in ((4000 + row.http_status, 4400) if row.http_status < 500 else (4500,))
    assert all(len(closes) == 1 for closes in by_ws.values()), by_ws
    assert close_code("unauthorized") == 4401 and close_code("invalid") == 4400
    assert close_code("bad_frame") == 4500  # a frame code no kind has


@pytest.mark.parametrize(
    ("exc", "status", "ws", "close", "exit_code"),
    [
        (UsageError("bad"), 400, "invalid", 4400, 2),
        (WorkspaceError("../x", "escapes"), 400, "invalid", 4400, 2),
        (ConfigError("bad", file="a.yao"), 422, "invalid", 4400, 2),
        (Unauthorized("no key"), 401, "unauthorized", 4401, 1),
        (Forbidden("admin only"), 403, "forbidden", 4403, 1),
        (NotFound("no such"), 404, "not_found", 4404, 2),
        (RecordNotFound("session", "c1"), 404, "not_found", 4404, 2),
        (SandboxNotFound("box"), 404, "not_found", 4404, 3),
        (Conflict("running"), 409, "conflict", 4409, 1),
        (BodyTooLarge("too big"), 413, "too_large", 4413, 2),
        (KeyRateLimited(1.0), 429, "rate_limited", 4429, 1),
        (CapacityError("owner a", 2), 429, "capacity", 4429, 3),
        (OwnerCapReached("a", 2, "websocket"), 429, "capacity", 4429, 3),
        (EngineUnavailable("no socket"), 503, "unavailable", 4500, 3),
        (StoreError("locked"), 503, "unavailable", 4500, 3),
        (SandboxError("box", "died"), 502, "failed", 4500, 3),
        (ImageBuildError("img", "tail"), 502, "failed", 4500, 3),
        (PrepareError("box", 0, "exit 1"), 502, "failed", 4500, 3),
        (GatewayError("port taken"), 502, "failed", 4500, 3),
        (RunnerError("claude", "exit 1"), 502, "failed", 4500, 1),
        (ModelError("openai", "cut"), 502, "failed", 4500, 1),
        (ToolError("read", "no file"), 500, "failed", 4500, 1),
        (ProtocolError(["no stream_start"]), 500, "failed", 4500, 1),
        (HookError("app.a", "Create", "boom"), 500, "failed", 4500, 1),
        (CallDepthError(["a", "b"], 1), 500, "failed", 4500, 1),
        (CageError("other"), 500, "failed", 4500, 1),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, CageError) else None,
)
def test_each_surface_reads_the_kind(
    exc: CageError, status: int, ws: str, close: int, exit_code: int
) -> None:
    row = surfaces(exc)
    assert (row.http_status, row.ws_code, row.close_code, row.exit_code) == (status, ws, close, exit_code)


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        (["runner_failed"], ExitCode.FAILED),
        (["orchestrator_restarted"], ExitCode.FAILED),
        ([], ExitCode.FAILED),
        (["model_error", "not_found"], ExitCode.CONFIG),
        (["invalid_options"], ExitCode.CONFIG),
        (["config_errors", "engine_unavailable"], ExitCode.INFRA),
        (["sandbox_not_found"], ExitCode.INFRA),
        (["sandbox_error", "turn_timeout"], ExitCode.TIMEOUT),
    ],
)
def test_a_failed_turn_exits_with_its_most_telling_code(codes: list[str], expected: ExitCode) -> None:
    assert turn_exit_code(codes) == expected


def _request(path: str) -> Request:
    return Request({"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b""})


async def test_http_bodies_carry_the_stable_code() -> None:
    missing = await cage_error_handler(_request("/v1/sessions/x"), RecordNotFound("session", "x"))
    assert missing.status_code == 404
    assert json.loads(bytes(missing.body)) == {
        "error": "RecordNotFound",
        "code": "record_not_found",
        "detail": "session 'x' not found",
    }
    openai = await cage_error_handler(_request("/v1/chat/completions"), Unauthorized("missing API key"))
    assert openai.status_code == 401 and openai.headers["www-authenticate"] == "Bearer"
    assert json.loads(bytes(openai.body))["error"] == {
        "message": "missing API key",
        "type": "Unauthorized",
        "param": None,
        "code": "unauthorized",
    }

    busy = await cage_error_handler(_request("/v1/assistants/a/stream"), Overloaded(60.0, 4))
    assert busy.status_code == 429 and busy.headers["retry-after"] == "1"
    assert json.loads(bytes(busy.body))["code"] == "server_busy"


def test_event_codes_resolve_to_kinds() -> None:
    assert event_kind("config_error") is ErrorKind.CONFIG
    assert event_kind("hook_error") is ErrorKind.INTERNAL
    assert event_kind("turn_timeout") is ErrorKind.TIMEOUT
    assert event_kind("model_api_error") is ErrorKind.AGENT  # a runner's own code
    assert not set(EVENT_CODE_KINDS) & {c.code for c in all_error_classes()}


def _is_error_call(node: ast.AST) -> bool:
    """`<builder>.error(...)`: what makes an error event."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "error"


def _mapping_sites(path: Path, names: set[str], codes: set[str]) -> list[str]:
    """Literal tables keyed by error classes, their names or their codes, close-code literals, and
    class names used as error-event codes."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Dict | ast.Set):
            items = node.keys if isinstance(node, ast.Dict) else node.elts
            keys = {k.id for k in items if isinstance(k, ast.Name)}
            strings = {k.value for k in items if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if len(keys & names) >= 2 or len(strings & names) >= 2 or len(strings & codes) >= 3:
                found.append(f"{where}: a table of errors")
        elif isinstance(node, ast.Constant) and isinstance(node.value, int) and 4400 <= node.value < 4600:
            found.append(f"{where}: close code {node.value}")
        elif _is_error_call(node) and any(
            isinstance(n, ast.Attribute) and n.attr == "__name__" for a in node.args for n in ast.walk(a)
        ):
            found.append(f"{where}: a class name as an error-event code")
    return found


def test_no_other_module_maps_errors_to_numbers() -> None:
    classes = all_error_classes()
    names = {c.__name__ for c in classes}
    codes = {c.code for c in classes} - {"not_found", "conflict", "forbidden", "unauthorized", "rate_limited"}
    # the table itself, and the client, which decodes close codes back into statuses
    skip = {REPO / "orchestrator/error_table.py", REPO / "orchestrator/client/session.py"}
    paths = [p for root in ("orchestrator", "runners") for p in sorted((REPO / root).rglob("*.py"))]
    paths = [p for p in paths if p not in skip]
    assert [site for p in paths for site in _mapping_sites(p, names, codes)] == []


def test_the_docs_list_every_code_with_its_kind() -> None:
    text = (REPO / "docs/protocol.md").read_text(encoding="utf-8")
    rows = {line for line in text.splitlines() if line.startswith("| `")}
    listed = {
        c.code for c in all_error_classes() if any(f"| `{c.code}` | `{c.kind.value}` |" in r for r in rows)
    }
    missing = sorted({c.code for c in all_error_classes()} - listed)
    assert missing == []
    for kind, row in TABLE.items():
        line = f"| `{kind.value}` | {row.http_status} | `{row.ws_code}` | {row.close_code} | {row.exit_code.value} |"
        assert any(r.startswith(line) for r in rows), line
