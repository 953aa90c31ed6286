"""Run `codex exec` with every tool call held for Cage: the in-container side of codex's asking.

Shipped into the sandbox as a file and run with the image's `python3` (standard library only,
Python 3.11; never imported by Cage itself)::

    python3 gate_driver.py --socket NAME [--prompt-stdin] [--allow TOOL]... -- codex exec ...

codex runs a `PreToolUse` hook (`gate_hook.py`, configured in `config.toml`) before each tool
call; the hook sends the call to this driver over the abstract unix socket `NAME`. The driver

1. starts codex with its stdout piped and copies every line to its own stdout unchanged (the
   host translator reads them exactly as from `codex exec --json`);
2. prints each held call as one line `{"type": "cage.gate.request", "id", "payload"}` (the
   hook's input: tool name, tool input, call id, cwd);
3. reads answer lines `{"id", "allow", "message"}` from stdin and hands each to its hook;
   when stdin ends (the turn is over, cancelled or stopped), every call still held and every
   later one is refused;
4. exits with codex's exit code (128 + signal when a signal ended it).

`--allow TOOL` answers that tool's calls at once without asking (codex's plan tool, which only
updates the to-do list shown to the client).

With `--prompt-stdin` the first stdin line is the prompt (a JSON string), written to codex's
stdin (which is then closed): a prompt too long for argv. Otherwise codex's stdin is /dev/null.
SIGINT/SIGTERM reach codex through the process group; the driver itself waits for codex.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

REQUEST_TYPE = "cage.gate.request"
CLOSED = "refused: Cage's control channel closed before this tool call was decided"
MAX_PAYLOAD = 8 * 1024 * 1024


class Channel:
    """Held calls by id, answered from stdin; refuses everything once stdin ended."""

    def __init__(self, allowed: frozenset[str] = frozenset()) -> None:
        self.allowed = allowed
        self.lock = threading.Lock()
        self.out = threading.Lock()
        self.waiting: dict[str, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self.closed = False
        self.count = 0

    def write_line(self, line: str) -> None:
        with self.out:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def ask(self, payload: Any) -> dict[str, Any]:
        """Print the request line and wait for its answer."""
        if isinstance(payload, dict) and payload.get("tool_name") in self.allowed:
            return {"allow": True, "message": ""}
        done = threading.Event()
        answer: list[dict[str, Any]] = []
        with self.lock:
            if self.closed:
                return {"allow": False, "message": CLOSED}
            self.count += 1
            request_id = str(self.count)
            self.waiting[request_id] = (done, answer)
        self.write_line(json.dumps({"type": REQUEST_TYPE, "id": request_id, "payload": payload}))
        done.wait()
        return answer[0] if answer else {"allow": False, "message": CLOSED}

    def answer(self, message: dict[str, Any]) -> None:
        with self.lock:
            entry = self.waiting.pop(str(message.get("id")), None)
        if entry is not None:
            entry[1].append(
                {"allow": message.get("allow") is True, "message": str(message.get("message") or "")}
            )
            entry[0].set()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            waiting, self.waiting = self.waiting, {}
        for done, _ in waiting.values():
            done.set()


def read_answers(channel: Channel, stdin: Any) -> None:
    """Answer lines until EOF, then refuse whatever is still held."""
    try:
        for raw in stdin:
            with contextlib.suppress(ValueError):
                message = json.loads(raw)
                if isinstance(message, dict):
                    channel.answer(message)
    finally:
        channel.close()


def serve_hook(channel: Channel, conn: socket.socket) -> None:
    """One hook connection: its payload in (until the hook shuts its side), the answer out."""
    with conn:
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_PAYLOAD:
            chunk = conn.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        try:
            payload = json.loads(b"".join(chunks).decode("utf-8", errors="replace"))
        except ValueError:
            payload = {"unreadable": True}
        result = channel.ask(payload)
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps(result).encode())


def accept(channel: Channel, server: socket.socket) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        threading.Thread(target=serve_hook, args=(channel, conn), daemon=True).start()


def copy_output(channel: Channel, stream: Any) -> None:
    for raw in stream:
        channel.write_line(raw.decode("utf-8", errors="replace").rstrip("\r\n"))


USAGE = "usage: gate_driver.py --socket NAME [--prompt-stdin] [--allow TOOL]... -- codex ..."


def parse(argv: list[str]) -> tuple[str, bool, frozenset[str], list[str]]:
    if "--" not in argv:
        raise SystemExit(USAGE)
    split = argv.index("--")
    own, command = argv[:split], argv[split + 1 :]
    if len(own) < 2 or own[0] != "--socket" or not command:
        raise SystemExit(USAGE)
    rest, prompt_stdin, allowed = own[2:], False, set()
    while rest:
        flag = rest.pop(0)
        if flag == "--prompt-stdin":
            prompt_stdin = True
        elif flag == "--allow" and rest:
            allowed.add(rest.pop(0))
        else:
            raise SystemExit(USAGE)
    return own[1], prompt_stdin, frozenset(allowed), command


def main(argv: list[str]) -> int:
    name, prompt_stdin, allowed, command = parse(argv)
    stopped: list[int] = []
    # A handler, not SIG_IGN: an ignored signal would stay ignored in codex across exec.
    signal.signal(signal.SIGINT, lambda signum, _frame: stopped.append(signum))
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopped.append(signum))
    channel = Channel(allowed)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("\0" + name)  # abstract: no file an agent's command could replace
    server.listen(16)
    threading.Thread(target=accept, args=(channel, server), daemon=True).start()
    prompt: bytes | None = None
    if prompt_stdin:
        first = sys.stdin.readline()
        prompt = str(json.loads(first)).encode() if first.strip() else b""
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE if prompt_stdin else subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.write(prompt or b"")
        process.stdin.close()
    threading.Thread(target=read_answers, args=(channel, sys.stdin), daemon=True).start()
    assert process.stdout is not None
    copy_output(channel, process.stdout)
    code = process.wait()
    server.close()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
