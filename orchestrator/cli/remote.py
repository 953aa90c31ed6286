"""The server a client command talks to: `--url` (`CAGE_URL`) and `--key` (`CAGE_KEY`)."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.errors import UsageError

UrlOption = Annotated[
    str, typer.Option("--url", envvar="CAGE_URL", help="The Cage server (default http://127.0.0.1:8080).")
]
KeyOption = Annotated[
    str | None,
    typer.Option(
        "--key",
        envvar="CAGE_KEY",
        help="API key (prefer CAGE_KEY: a flag shows in `ps`).",
        show_default=False,
    ),
]


def require_key(key: str | None) -> str:
    """The API key.

    Raises:
        UsageError: none given; says where the first one comes from.
    """
    if not key:
        raise UsageError(
            "no API key: set CAGE_KEY (the first start of `cage serve` made an admin key; "
            "`cage keys create` makes more)"
        )
    return key
