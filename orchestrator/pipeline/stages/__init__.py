"""The stages of a call around its mode: the history before it, the sandbox it runs in."""
