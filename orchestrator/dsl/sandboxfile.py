"""Reading a sandbox definition (`sandbox.yao`, or `sandbox` embedded in `package.yao`).

Before validation: `$ENV.` expansion in `environment`, the VNC password and secret values, and
`agent.yml`'s default runner filled in under the file's own `runner.name` (the file wins).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from orchestrator.dsl.diagnostics import validate
from orchestrator.dsl.document import Document, KeyPath
from orchestrator.dsl.envexpand import EnvExpander
from orchestrator.dsl.sandbox import SandboxSpec


def load_sandbox(
    doc: Document, *, environ: Mapping[str, str], default_runner: str | None = None, prefix: KeyPath = ()
) -> SandboxSpec:
    """Validate the sandbox definition found at `prefix` in `doc`.

    Raises:
        ConfigError: a missing `$ENV` variable or an invalid key (`ConfigErrors` for several).
    """
    root = copy.deepcopy(doc.value)
    data = _at(root, prefix)
    if isinstance(data, dict):
        expander = EnvExpander(environ, doc)
        expander.expand_values(root, (*prefix, "environment"))
        computer = data.get("computer")
        if isinstance(computer, dict) and isinstance(computer.get("vnc"), dict):
            expander.expand_in(root, (*prefix, "computer", "vnc", "password"), secret=True)
        secrets = data.get("secrets")
        if isinstance(secrets, dict):
            for name, entry in secrets.items():
                if isinstance(entry, dict):
                    expander.expand_in(root, (*prefix, "secrets", name, "value"), secret=True)
                else:
                    expander.expand_in(root, (*prefix, "secrets", name), secret=True)
        if default_runner:
            runner = data.get("runner")
            if runner is None:
                data["runner"] = {"name": default_runner}
            elif isinstance(runner, dict) and "name" not in runner:
                runner["name"] = default_runner
    return validate(SandboxSpec, data, doc, prefix)


def _at(root: Any, prefix: KeyPath) -> Any:
    node = root
    for part in prefix:
        node = node[part]
    return node
