"""What runs inside the `tai` image: the `cage-tai` CLI and its stdio permission gate.

Never imported by host code (import contract); it imports the native loop (`orchestrator.llm`)
and the wire formats it shares with the host (`runners.tai.turn`, `runners.tai.control`), never
the orchestrator's host side (API, pipeline, sandbox, store, gateway).
"""
