"""`ApiAssistantPolicy`: what an assistant created over the API may ask of the engine.

File assistants come from the operator's app directory; API-created ones from a network client
(an admin key). So their sandbox specs are held to a ceiling the operator sets: memory, CPUs and
pids at most these, an engine runtime and a base image only from the allowed lists (none: the
defaults only), egress only of the allowed kinds, and no fixed host port.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from orchestrator.dsl import SandboxSpec
from orchestrator.dsl.sandbox import NetworkAllowlist
from orchestrator.errors import ConfigError


class ApiAssistantPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    max_memory_bytes: int = 8 * 2**30
    max_cpus: float = 4.0
    max_pids: int = 4096
    allowed_runtimes: tuple[str, ...] = ()
    allowed_images: tuple[str, ...] = ()
    allowed_networks: tuple[str, ...] = ("none", "bridge", "allowlist")

    def problems(self, assistant_id: str, spec: SandboxSpec) -> list[ConfigError]:
        """Every way `spec` goes past the policy, each naming its `sandbox.computer.<key>`."""
        computer = spec.computer
        found: list[tuple[str, str]] = []
        if computer.memory is not None and computer.memory > self.max_memory_bytes:
            found.append(("memory", f"at most {self.max_memory_bytes} bytes for API-created assistants"))
        if computer.cpus is not None and computer.cpus > self.max_cpus:
            found.append(("cpus", f"at most {self.max_cpus:g} for API-created assistants"))
        if computer.pids > self.max_pids:
            found.append(("pids", f"at most {self.max_pids} for API-created assistants"))
        if computer.runtime is not None and computer.runtime not in self.allowed_runtimes:
            found.append(
                ("runtime", f"{computer.runtime!r} is not allowed ({_listed(self.allowed_runtimes)})")
            )
        if computer.image is not None and computer.image not in self.allowed_images:
            found.append(("image", f"{computer.image!r} is not allowed ({_listed(self.allowed_images)})"))
        network = "allowlist" if isinstance(computer.network, NetworkAllowlist) else computer.network
        if network not in self.allowed_networks:
            found.append(("network", f"{network!r} is not allowed ({_listed(self.allowed_networks)})"))
        if any(port.host_port for port in computer.ports):
            found.append(("ports", "a fixed host_port is not allowed for API-created assistants"))
        return [
            ConfigError(message, file=f"assistant {assistant_id}", key_path=f"sandbox.computer.{key}")
            for key, message in found
        ]


def _listed(allowed: tuple[str, ...]) -> str:
    return "allowed: " + ", ".join(allowed) if allowed else "none is allowed over the API"
