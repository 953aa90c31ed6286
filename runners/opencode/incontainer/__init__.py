"""Scripts shipped into the opencode sandbox as files and run there with the image's `python3`:
the `opencode serve` driver. Standard library only; host code reads it as text
(`runners.opencode.invocation`) and never imports it (import contract).
"""
