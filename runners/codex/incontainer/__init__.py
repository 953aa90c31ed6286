"""Scripts shipped into the codex sandbox as files and run there with the image's `python3`:
the gate driver and its `PreToolUse` hook. Standard library only; host code reads them as text
(`runners.codex.invocation.gate_source`) and never imports them (import contract).
"""
