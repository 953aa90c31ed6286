"""`runner.options` of an opencode assistant (sandbox.yao), validated."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from runners.options import RunnerOptions

DriveMode = Literal["auto", "run", "serve"]


class OpencodeOptions(RunnerOptions):
    """What an assistant may tune for opencode. Unknown keys are an error, not silently dropped."""

    model: str | None = None
    """Model id sent to the API instead of the connector's model."""
    agent: str | None = None
    """opencode agent to run (`build`, `plan`, or one defined in the config); opencode's default if unset."""
    variant: str | None = None
    """Provider-specific reasoning effort (`opencode run --variant`: `low`, `high`, `max`...)."""
    drive: DriveMode = "auto"
    """`run`: one `opencode run` per turn; `serve`: a resident `opencode serve` per container;
    `auto`: `run` for oneshot boxes, `serve` for the long-lived lifecycles."""
    serve_port: int = Field(default=4096, ge=1024, le=65535)
    """Loopback port of the resident `opencode serve` inside the container."""
    startup_timeout: float = Field(default=60.0, gt=0, le=600)
    """Seconds the driver waits for a new `opencode serve` to answer."""
    bash_timeout_ms: int | None = Field(default=None, ge=1000)
    """Default timeout of the agent's bash tool (`OPENCODE_EXPERIMENTAL_BASH_DEFAULT_TIMEOUT_MS`)."""
    context_window: int = Field(default=200_000, ge=1024)
    """The model's context window, used by opencode to decide when to compact."""
    permission_mode: Literal["bypassPermissions"] | None = None
    """Yao's key. Only `bypassPermissions`, what Yao's headless opencode runs with and what Cage
    does without a policy, is accepted: opencode never asks on its own here. Whether it asks (Cage,
    never its terminal) is the `permissions` policy of sandbox.yao, so another value is refused
    rather than silently dropped."""

    @field_validator("permission_mode", mode="before")
    @classmethod
    def _bypass_only(cls, value: Any) -> Any:
        if value is not None and value != "bypassPermissions":
            raise ValueError(
                f"{value!r}: opencode runs with bypassPermissions only; to have it ask before a "
                "tool runs, set `permissions` in sandbox.yao (Cage asks the client)"
            )
        return value
