"""`python -m orchestrator.cli` = `cage`."""

from orchestrator.cli.app import entry

entry()
