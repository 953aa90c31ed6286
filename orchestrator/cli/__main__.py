"""`python -m orchestrator.cli` = `cage`."""

from orchestrator.cli.launch import entry

entry()
