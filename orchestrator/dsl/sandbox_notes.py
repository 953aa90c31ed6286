"""`sandbox.yao` keys that load but that Cage does not act on, and the one it checks: each becomes
a `ConfigWarning` (file, line, key path and why; `cage validate` prints it and fails with
`--strict`) instead of being accepted and dropped.

`computer.vnc` enabled, `filter` and `runner.mode: service` are warned about; `runner.supports` takes
effect as a check: a runner outside the list is a `ConfigError`.
"""

from __future__ import annotations

from orchestrator.dsl.document import Document, KeyPath, format_key_path
from orchestrator.dsl.inert import ConfigWarning, warning
from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.errors import ConfigError

VNC = "Cage's sandbox images run no desktop or VNC server (reach a service in the box through `ports`)"
FILTER = "every box runs on Cage's one container engine; there is no pool of nodes to pick from"
SERVICE = (
    "Cage starts the runner's CLI for each turn and stops what it leaves behind (opencode keeps its "
    "own server between turns); there is no service mode"
)


def sandbox_notes(doc: Document, spec: SandboxSpec, prefix: KeyPath = ()) -> list[ConfigWarning]:
    """The warnings `spec` earns, in file order.

    Raises:
        ConfigError: `runner.supports` does not list the runner.
    """
    runner = spec.runner
    if runner.supports and runner.name not in runner.supports:
        path = (*prefix, "runner", "supports")
        raise ConfigError(
            f"runner {runner.name!r} is not among the runners this assistant supports "
            f"({', '.join(runner.supports)})",
            file=doc.file,
            key_path=format_key_path(path),
            line=doc.line_for(path),
        )
    notes = []
    if spec.computer.vnc.enabled:
        notes.append(warning(doc, (*prefix, "computer", "vnc"), f"has no effect in Cage: {VNC}"))
    if spec.filter is not None:
        notes.append(warning(doc, (*prefix, "filter"), f"has no effect in Cage: {FILTER}"))
    if runner.mode == "service":
        notes.append(warning(doc, (*prefix, "runner", "mode"), f"has no effect in Cage: {SERVICE}"))
    return sorted(notes, key=lambda w: (w.line or 0, w.key_path))
