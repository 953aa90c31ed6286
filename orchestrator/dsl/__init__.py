"""The application directory as models: assistants, `sandbox.yao`, connectors, MCP servers, `agent.yml`.

Code outside this package imports from here, not from the modules inside it.
"""

from orchestrator.dsl.agentconfig import AgentConfig, RoleConnectors, Uses
from orchestrator.dsl.assistant import Assistant, AssistantMode, is_system_id
from orchestrator.dsl.connectors import ConnectorSpec, ConnectorType
from orchestrator.dsl.document import Document, format_key_path
from orchestrator.dsl.inert import ConfigWarning
from orchestrator.dsl.jsonc import parse_jsonc
from orchestrator.dsl.loader import AppLoader, LoadReport
from orchestrator.dsl.mcp import McpOptions, McpServerRef, McpServerSpec, ProcessTool
from orchestrator.dsl.package import PackageOptions, PackageSpec, Prompt
from orchestrator.dsl.promptvars import expand_prompts
from orchestrator.dsl.sandbox import (
    ComputerSpec,
    CopyStep,
    ExecStep,
    FileStep,
    Lifecycle,
    NetworkAllowlist,
    PortSpec,
    PrepareStep,
    RoleConnector,
    RunnerSpec,
    SandboxSpec,
    SecretEntry,
    VncSpec,
)
from orchestrator.dsl.schema import package_schema, sandbox_schema
from orchestrator.dsl.skills import Skill, SkillFile
from orchestrator.dsl.units import Duration, MemoryBytes, format_duration, parse_duration, parse_memory
from orchestrator.dsl.yamldoc import parse_yaml

__all__ = [
    "AgentConfig",
    "AppLoader",
    "Assistant",
    "AssistantMode",
    "ComputerSpec",
    "ConfigWarning",
    "ConnectorSpec",
    "ConnectorType",
    "CopyStep",
    "Document",
    "Duration",
    "ExecStep",
    "FileStep",
    "Lifecycle",
    "LoadReport",
    "McpOptions",
    "McpServerRef",
    "McpServerSpec",
    "MemoryBytes",
    "NetworkAllowlist",
    "PackageOptions",
    "PackageSpec",
    "PortSpec",
    "PrepareStep",
    "ProcessTool",
    "Prompt",
    "RoleConnector",
    "RoleConnectors",
    "RunnerSpec",
    "SandboxSpec",
    "SecretEntry",
    "Skill",
    "SkillFile",
    "Uses",
    "VncSpec",
    "expand_prompts",
    "format_duration",
    "format_key_path",
    "is_system_id",
    "package_schema",
    "parse_duration",
    "parse_jsonc",
    "parse_memory",
    "parse_yaml",
    "sandbox_schema",
]
