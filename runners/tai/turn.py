"""`TaiTurn`: what `cage-tai run` reads on stdin — one turn, as JSON, without any secret.

The connector key (and headers, which may carry credentials) travel in environment variables
named here (`key_env`, `headers_env`); the adapter lists them in `RunnerExec.secret_env`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.attribute_docs import describe_fields
from orchestrator.dsl import McpServerSpec
from orchestrator.llm.compaction import CompactionPolicy
from orchestrator.llm.messages import Sampling
from runners.native_loop.options import NativeOptions

_FROZEN = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)
KEY_ENV = "CAGE_TAI_MODEL_KEY"
HEADERS_ENV = "CAGE_TAI_MODEL_HEADERS"
MCP_ENV_PREFIX = "CAGE_TAI_MCP_"
"""Variables holding the MCP servers' env and header values (hidden from the coding tools)."""
MAX_TURN_BYTES = 16 * 2**20
"""The largest turn document `cage-tai run` accepts on stdin."""


class TaiModel(BaseModel):
    """The connector as the CLI needs it: where to call, how, and where the key is."""

    model_config = _FROZEN
    provider: Literal["anthropic", "openai"]
    model: str
    base_url: str
    """As seen from where the CLI runs (inside a container: the host-gateway alias)."""
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    key_env: str = KEY_ENV
    """Environment variable holding the API key (may be unset when the server needs none)."""
    headers_env: str | None = None
    """Environment variable holding extra request headers as a JSON object, if any."""
    max_tokens: int = Field(default=4096, ge=1)
    temperature: float | None = None
    thinking: bool = False
    thinking_budget: int = Field(default=2048, ge=1)
    sampling: Sampling = Sampling()
    """The package's other request parameters (`top_p`, `stop`, `seed`, provider keys...)."""


class TaiMcpServer(BaseModel):
    """An MCP server of the assistant for the loop to connect to, from inside the container.

    `server` holds no secret: its `env` and `headers` are empty, and `env_vars`/`header_vars`
    name, for each of them, the environment variable of the exec that holds the value (an HTTP
    server's URL and token are the model gateway's, which adds the real credentials outside)."""

    model_config = _FROZEN
    server: McpServerSpec
    env_vars: dict[str, str] = Field(default_factory=dict)
    header_vars: dict[str, str] = Field(default_factory=dict)


class HistoryMessage(BaseModel):
    """An earlier message of the conversation, as text."""

    model_config = _FROZEN
    role: Literal["user", "assistant"]
    content: str


class TaiImage(BaseModel):
    """An attached image, by its path in the box (`cage-tai` reads it there)."""

    model_config = _FROZEN
    path: str
    media_type: str
    name: str


class TaiTurn(BaseModel):
    """One turn for `cage-tai run`."""

    model_config = _FROZEN
    v: Literal[1] = 1
    assistant_id: str
    session_id: str
    """The session; sub-agents get child sessions below it."""
    turn_id: str
    prompt: str = Field(min_length=1)
    system: str = ""
    history: tuple[HistoryMessage, ...] = ()
    model: TaiModel
    options: NativeOptions = NativeOptions()
    workdir: str | None = None
    """Where the tools run; None: the CLI's working directory."""
    checkpoint_dir: str | None = None
    """Save a checkpoint after every step as `<dir>/<turn_id>.json`."""
    resume_turn_id: str | None = None
    """Start from the messages of this earlier turn's checkpoint (in `checkpoint_dir`)."""
    ask_permissions: bool = False
    """Ask the host before each tool call and offer the `question` tool: control lines on
    stdout, answers on stdin, which stays open after this document's line
    (`runners.tai.control`)."""
    mcp_servers: tuple[TaiMcpServer, ...] = ()
    """Offered besides the coding tools as `<server>__<tool>` (each server's allowlist applies);
    stdio servers run as children of the CLI, in the container."""
    compaction: CompactionPolicy | None = None
    """Summarise the oldest history past this budget (the adapter sets it unless the package
    turns `compaction` off); None: never compact."""
    skills_dir: str | None = None
    """Where the pipeline wrote the assistant's skills (`<name>/SKILL.md`): listed in the system
    prompt, each body offered through the `skill` tool. Missing or empty: no skills."""
    summary_model: str | None = None
    """The `light` role's model (same endpoint as `model`): writes the compaction summaries."""
    images: tuple[TaiImage, ...] = ()
    """Attached images, sent with the prompt as image parts (the adapter lists them only for a
    connector with vision; the prompt's line names the files either way)."""
