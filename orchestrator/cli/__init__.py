"""The `cage` command."""

from __future__ import annotations

from orchestrator.cli.app import app, main

__all__ = ["app", "main"]
