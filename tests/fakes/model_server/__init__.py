"""A scripted fake model API (Anthropic Messages, Chat Completions, Responses) for tests.

The real agent CLIs and Cage's own connectors talk to it instead of a model provider; see
`tests/fakes/README.md`.
"""

from tests.fakes.model_server.registry import ScenarioRegistry, UnknownScenarioError, scenario_name
from tests.fakes.model_server.reply import Usage, input_tokens, tokens
from tests.fakes.model_server.request_log import RequestLog, RequestRecord
from tests.fakes.model_server.scenario import (
    BUILTIN,
    Scenario,
    ShellPart,
    Step,
    TextPart,
    ThinkingPart,
    ToolPart,
    load_scenario,
    scenario,
    shell,
    text,
    thinking,
    tool,
)
from tests.fakes.model_server.server import FakeModelServer

__all__ = [
    "BUILTIN",
    "FakeModelServer",
    "RequestLog",
    "RequestRecord",
    "Scenario",
    "ScenarioRegistry",
    "ShellPart",
    "Step",
    "TextPart",
    "ThinkingPart",
    "ToolPart",
    "UnknownScenarioError",
    "Usage",
    "input_tokens",
    "load_scenario",
    "scenario",
    "scenario_name",
    "shell",
    "text",
    "thinking",
    "tokens",
    "tool",
]
