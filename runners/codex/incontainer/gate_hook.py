"""codex's `PreToolUse` hook when Cage decides tool calls: ask the gate driver, allow or block.

Shipped into the sandbox as a file and run by codex with the image's `python3` (standard library
only; never imported by Cage itself): `python3 gate_hook.py NAME`. It sends the hook input (JSON
on stdin) to the driver's abstract unix socket `NAME`, waits for `{"allow", "message"}` and

* allow: exits 0 without output (codex runs the tool);
* deny: prints the message on stderr and exits 2 (codex blocks the call and gives the model
  "Command blocked by PreToolUse hook: <message>").

Anything that goes wrong (no driver, a broken answer) blocks the call: the hook fails closed.
"""

from __future__ import annotations

import json
import socket
import sys

BLOCK = 2


def decide(name: str, payload: bytes) -> tuple[bool, str]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect("\0" + name)
        conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    answer = json.loads(b"".join(chunks).decode("utf-8"))
    return answer.get("allow") is True, str(answer.get("message") or "")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("refused: the Cage gate hook was started without its socket name\n")
        return BLOCK
    payload = sys.stdin.buffer.read()
    try:
        allow, message = decide(argv[0], payload)
    except (OSError, ValueError, AttributeError) as exc:
        sys.stderr.write(f"refused: Cage could not decide this tool call ({exc.__class__.__name__})\n")
        return BLOCK
    if allow:
        return 0
    sys.stderr.write((message or "refused by Cage's permission policy") + "\n")
    return BLOCK


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
