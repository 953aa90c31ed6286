"""The `cage` command."""

from __future__ import annotations

from orchestrator.cli.app import app, entry, main

__all__ = ["app", "entry", "main"]
