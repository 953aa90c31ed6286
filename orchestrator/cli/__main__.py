"""`python -m orchestrator.cli` = `cage`."""

from orchestrator.cli.app import main

main()
