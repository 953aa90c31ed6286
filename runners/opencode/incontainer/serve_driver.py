"""Drive one turn of a resident `opencode serve` and print its events as JSON lines.

Shipped into the sandbox as a file and run with the image's `python3` (standard library only,
Python 3.11; never imported by Cage itself). One call is one turn:

1. make sure a server answers `GET /global/health` on 127.0.0.1:<port>; start
   `opencode serve` in its own session (so the bridge's signals never reach it) when none does,
   or when the config it was started with changed (digest in `serve.json`); every request
   has a short timeout and start-up is polled (reference/clis.md: early requests can block);
2. reuse the session given with `--session` if the server still knows it, else create one;
3. subscribe to `GET /event`, then post the prompt (read from stdin) to `prompt_async`;
4. print every event of that session as one line until the session goes idle;
5. on SIGINT/SIGTERM: `POST /session/<id>/abort`, print what follows for a few seconds
   (the abort error, the idle status), exit 130/143.

Lines of its own have types `cage.driver.*`: `session` (the session id, whether it was
resumed and how the server was found), `abort`, and `error` (with a message), so the
translator never has to guess from the exit code alone.

With `--control` (Cage decides tool calls: the config makes opencode ask) stdin stays open:
its first line is the prompt (a JSON string), every later line an answer the driver posts to
the server while the turn runs (the `permission.asked` / `question.asked` events it answers are
printed like any other event of the session):

* `{"permission": "per_...", "reply": "once"|"reject", "message": "..."}` ->
  `POST /permission/<id>/reply`;
* `{"question": "que_...", "answers": [["..."], ...]}` -> `POST /question/<id>/reply`, and
  `{"question": "que_...", "reject": true}` -> `POST /question/<id>/reject`.

A failed post is reported as a `cage.driver.reply` line with `ok: false`.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import http.client
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
QUICK = 2.0
"""Seconds for requests that must answer at once (health, abort)."""
SLOW = 60.0
"""Seconds for requests that may wait for the instance bootstrap (session create/get, prompt)."""
ABORT_DRAIN = 5.0
"""Seconds to keep printing events after an abort, waiting for the session to go idle."""
CHILD_REQUESTS = frozenset({"permission.asked", "question.asked"})
"""Events of a sub-agent session that are printed too."""
_DIGEST_ENV_PREFIXES = ("OPENCODE_", "CAGE_OPENCODE_", "XDG_", "HOME")


class DriverError(Exception):
    """A failure the driver reports as a `cage.driver.error` line and exit code 1."""


def emit(kind: str, **properties: Any) -> None:
    write_line(json.dumps({"type": f"cage.driver.{kind}", "properties": properties}))


def write_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Server:
    """HTTP calls to the server on loopback, each with its own timeout."""

    def __init__(self, port: int, directory: str) -> None:
        self.port = port
        self.directory = directory

    def url(self, path: str) -> str:
        return f"{path}?{urllib.parse.urlencode({'directory': self.directory})}"

    def request(
        self, method: str, path: str, body: Any = None, *, timeout: float = QUICK
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, self.url(path), body=data, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def healthy(self) -> bool:
        try:
            status, body = self.request("GET", "/global/health", timeout=QUICK)
        except (OSError, http.client.HTTPException):
            return False
        if status != 200:
            return False
        try:
            return bool(json.loads(body).get("healthy"))
        except (ValueError, AttributeError):
            return False


def config_digest(config_path: str) -> str:
    """What the running server was started with: the config text and the env it depends on."""
    digest = hashlib.sha256()
    try:
        digest.update(Path(config_path).read_bytes())
    except OSError:
        digest.update(b"<no config>")
    for name in sorted(os.environ):
        if name.startswith(_DIGEST_ENV_PREFIXES):
            digest.update(f"\0{name}={os.environ[name]}".encode())
    return digest.hexdigest()


def read_record(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def stop_process(pid: int) -> None:
    """SIGTERM the old server's process group, SIGKILL it after 2 s."""
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.1)


def log_tail(path: Path, limit: int = 1500) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", errors="replace").strip()
    except OSError:
        return ""


def ensure_server(server: Server, args: argparse.Namespace) -> str:
    """A healthy server started with the current config; returns how it was found."""
    state = Path(args.state)
    record_path, log_path = state / "serve.json", state / "serve.log"
    digest = config_digest(args.config)
    state.mkdir(parents=True, exist_ok=True)
    with (state / "serve.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = read_record(record_path)
        healthy = server.healthy()
        if healthy and record.get("digest") == digest:
            return "running"
        how = "started"
        if isinstance(record.get("pid"), int):
            stop_process(record["pid"])
            how = "restarted"
        elif healthy:
            raise DriverError(f"port {server.port} is taken by a server this driver did not start")
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                ["opencode", "serve", "--hostname", HOST, "--port", str(server.port)],
                cwd=args.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        record_path.write_text(json.dumps({"pid": process.pid, "digest": digest, "port": server.port}))
        deadline = time.monotonic() + args.startup_timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise DriverError(f"opencode serve exited with {process.returncode}: {log_tail(log_path)}")
            if server.healthy():
                try:
                    check_config(server, args.provider)
                except (DriverError, OSError, http.client.HTTPException):
                    stop_process(process.pid)
                    record_path.unlink(missing_ok=True)
                    raise
                return how
            time.sleep(0.25)
        stop_process(process.pid)
        raise DriverError(
            f"opencode serve did not answer within {args.startup_timeout:g}s: {log_tail(log_path)}"
        )


def check_config(server: Server, provider: str) -> None:
    """Fail loudly when the new server runs without the generated config: opencode silently
    skips a config file it cannot read or parse, and would then fall back to its own providers."""
    if not provider:
        return
    status, data = server.request("GET", "/config/providers", timeout=SLOW)
    try:
        found = [p.get("id") for p in json.loads(data).get("providers", [])] if status == 200 else []
    except (ValueError, AttributeError):
        found = []
    if provider not in found:
        raise DriverError(f"opencode serve did not load the generated config (no provider {provider!r})")


def open_session(server: Server, wanted: str, title: str) -> tuple[str, bool]:
    """The session to prompt: `wanted` if the server knows it, else a new one."""
    if wanted:
        status, _ = server.request("GET", f"/session/{urllib.parse.quote(wanted)}", timeout=SLOW)
        if status == 200:
            return wanted, True
    body = {"title": title} if title else {}
    status, data = server.request("POST", "/session", body, timeout=SLOW)
    if status != 200:
        raise DriverError(f"creating a session failed: HTTP {status}: {data[:500].decode(errors='replace')}")
    session_id = json.loads(data).get("id")
    if not isinstance(session_id, str):
        raise DriverError("creating a session returned no id")
    return session_id, False


def session_of(event: dict[str, Any]) -> str | None:
    """The session an event belongs to, wherever this event type keeps it."""
    props = event.get("properties")
    if not isinstance(props, dict):
        return None
    if isinstance(props.get("sessionID"), str):
        return str(props["sessionID"])
    for key in ("part", "info"):
        inner = props.get(key)
        if isinstance(inner, dict) and isinstance(inner.get("sessionID"), str):
            return str(inner["sessionID"])
    return None


def read_events(server: Server, out: queue.Queue[dict[str, Any] | None], connected: threading.Event) -> None:
    """SSE reader thread: parsed events into `out`, then None when the stream ends."""
    try:
        conn = http.client.HTTPConnection(HOST, server.port, timeout=SLOW)
        conn.request("GET", server.url("/event"), headers={"Accept": "text/event-stream"})
        response = conn.getresponse()
        if response.status != 200:
            return
        if conn.sock is not None:
            conn.sock.settimeout(None)  # an agent may be quiet for long; the bridge watches stalls
        connected.set()
        data: list[str] = []
        while True:
            raw = response.readline()
            if not raw:
                return
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:
                with contextlib.suppress(ValueError):
                    event = json.loads("\n".join(data))
                    if isinstance(event, dict):
                        out.put(event)
                data = []
    except (OSError, http.client.HTTPException):
        return
    finally:
        connected.set()
        out.put(None)


class Turn:
    """The main loop: forward the session's events until it goes idle (or the abort drains)."""

    def __init__(self, server: Server, session_id: str) -> None:
        self.server = server
        self.session_id = session_id
        self.stop_signal: int | None = None
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.busy = False
        self.sessions = {session_id}
        """The turn's session and its sub-agent sessions (by `parentID`)."""

    def wanted(self, event: dict[str, Any]) -> bool:
        """An event of the turn's session, or a request of one of its sub-agent sessions (a
        `task` runs in a child session: its permission and question requests must reach Cage,
        or the sub-agent would wait forever; its other events stay filtered, as in `run`)."""
        kind = event.get("type")
        if kind in ("session.created", "session.updated"):
            info = event.get("properties", {}).get("info")
            if (
                isinstance(info, dict)
                and info.get("parentID") in self.sessions
                and isinstance(info.get("id"), str)
            ):
                self.sessions.add(info["id"])
        session = session_of(event)
        if session == self.session_id:
            return True
        return kind in CHILD_REQUESTS and session in self.sessions

    def on_signal(self, signum: int, _frame: object) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum

    def done(self, event: dict[str, Any]) -> bool:
        kind = event.get("type")
        if kind == "session.idle":
            return True
        if kind == "session.status":
            status = event.get("properties", {}).get("status", {}).get("type")
            if status == "idle":
                return self.busy
            self.busy = True
        return False

    def run(self, prompt_body: dict[str, Any]) -> int:
        connected = threading.Event()
        threading.Thread(target=read_events, args=(self.server, self.events, connected), daemon=True).start()
        connected.wait(SLOW)
        if self.stop_signal is not None:
            return 128 + self.stop_signal
        path = f"/session/{urllib.parse.quote(self.session_id)}/prompt_async"
        status, data = self.server.request("POST", path, prompt_body, timeout=SLOW)
        if status not in (200, 204):
            raise DriverError(f"prompt_async failed: HTTP {status}: {data[:500].decode(errors='replace')}")
        drain_until: float | None = None
        while True:
            if self.stop_signal is not None and drain_until is None:
                drain_until = time.monotonic() + ABORT_DRAIN
                self.abort()
            if drain_until is not None and time.monotonic() > drain_until:
                return 128 + (self.stop_signal or signal.SIGTERM)
            try:
                event = self.events.get(timeout=0.2)
            except queue.Empty:
                continue
            if event is None:
                if drain_until is not None:
                    return 128 + (self.stop_signal or signal.SIGTERM)
                raise DriverError("the opencode server closed its event stream")
            if not self.wanted(event):
                continue
            write_line(json.dumps(event, separators=(",", ":")))
            if self.done(event):
                return 128 + self.stop_signal if self.stop_signal is not None else 0

    def abort(self) -> None:
        path = f"/session/{urllib.parse.quote(self.session_id)}/abort"
        try:
            status, _ = self.server.request("POST", path, {}, timeout=QUICK)
        except (OSError, http.client.HTTPException) as exc:
            emit("abort", sessionID=self.session_id, ok=False, message=str(exc))
            return
        emit("abort", sessionID=self.session_id, ok=status == 200, signal=self.stop_signal)


def post_answer(server: Server, answer: dict[str, Any]) -> None:
    """Post one control answer to the server (see the module docstring)."""
    if isinstance(answer.get("permission"), str):
        target = answer["permission"]
        path = f"/permission/{urllib.parse.quote(target)}/reply"
        body: dict[str, Any] = {"reply": "once" if answer.get("reply") == "once" else "reject"}
        if body["reply"] == "reject" and answer.get("message"):
            body["message"] = str(answer["message"])
    elif isinstance(answer.get("question"), str):
        target = answer["question"]
        if answer.get("reject") is True or not isinstance(answer.get("answers"), list):
            path, body = f"/question/{urllib.parse.quote(target)}/reject", {}
        else:
            path, body = f"/question/{urllib.parse.quote(target)}/reply", {"answers": answer["answers"]}
    else:
        return
    try:
        status, data = server.request("POST", path, body, timeout=SLOW)
    except (OSError, http.client.HTTPException) as exc:
        emit("reply", id=target, ok=False, message=str(exc))
        return
    if status != 200:
        emit("reply", id=target, ok=False, message=f"HTTP {status}: {data[:300].decode(errors='replace')}")


def read_answers(server: Server, stdin: Any) -> None:
    """Control answers from stdin until EOF, each posted at once."""
    for raw in stdin:
        with contextlib.suppress(ValueError):
            answer = json.loads(raw)
            if isinstance(answer, dict):
                post_answer(server, answer)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="serve_driver")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--state", required=True, help="folder for serve.json, serve.log, serve.lock")
    parser.add_argument("--config", required=True, help="the opencode.json the server must run with")
    parser.add_argument("--session", default="")
    parser.add_argument("--title", default="")
    parser.add_argument("--model", default="", help="provider/model")
    parser.add_argument("--provider", default="", help="the provider the config must define")
    parser.add_argument("--agent", default="")
    parser.add_argument("--variant", default="")
    parser.add_argument("--startup-timeout", type=float, default=60.0)
    parser.add_argument("--control", action="store_true", help="prompt line, then answers, on stdin")
    parser.add_argument(
        "--file", nargs=2, action="append", default=[], metavar=("MIME", "PATH"), help="a file to attach"
    )
    return parser.parse_args(argv)


def prompt_body(args: argparse.Namespace, prompt: str) -> dict[str, Any]:
    files = [
        {
            "type": "file",
            "mime": mime,
            "url": "file://" + urllib.parse.quote(path),
            "filename": path.rpartition("/")[2],
        }
        for mime, path in args.file
    ]
    body: dict[str, Any] = {"parts": [{"type": "text", "text": prompt}, *files]}
    if args.model:
        provider, _, model = args.model.partition("/")
        body["model"] = {"providerID": provider, "modelID": model}
    if args.agent:
        body["agent"] = args.agent
    if args.variant:
        body["variant"] = args.variant
    return body


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.control:
        first = sys.stdin.readline()
        prompt = str(json.loads(first)) if first.strip() else ""
    else:
        prompt = sys.stdin.read()
    server = Server(args.port, args.workdir)
    turn: Turn | None = None
    pending: list[int] = []

    def early(signum: int, _frame: object) -> None:
        pending.append(signum)

    signal.signal(signal.SIGINT, early)
    signal.signal(signal.SIGTERM, early)
    try:
        how = ensure_server(server, args)
        if pending:
            return 128 + pending[0]
        session_id, resumed = open_session(server, args.session, args.title)
        emit("session", sessionID=session_id, resumed=resumed, server=how)
        turn = Turn(server, session_id)
        if pending:
            turn.stop_signal = pending[0]
        signal.signal(signal.SIGINT, turn.on_signal)
        signal.signal(signal.SIGTERM, turn.on_signal)
        if args.control:
            threading.Thread(target=read_answers, args=(server, sys.stdin), daemon=True).start()
        return turn.run(prompt_body(args, prompt))
    except DriverError as exc:
        emit("error", message=str(exc))
        return 1
    except (OSError, http.client.HTTPException) as exc:
        emit("error", message=f"talking to opencode serve failed: {exc}")
        return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
