"""The environment a test hands a subprocess (`cage serve`, `cage run`, a CLI command): this
process's own without the `CAGE_*` settings of whoever started the tests, so the subprocess sees
only what the test sets, plus the few variables it needs to reach this test session's engine."""

from __future__ import annotations

import os
from collections.abc import Collection

ENGINE_VARS = frozenset(
    {"CAGE_BASE_IMAGE", "CAGE_DOCKER_HOST", "CAGE_EXTRA_CA_CERTS", "CAGE_EGRESS_CONTAINER"}
)
"""What a subprocess running sandboxes keeps: the engine, the base image, the CA bundle runner
images get, and this session's own egress proxy (`tests/integration/conftest.py`)."""
EGRESS_VAR = "CAGE_EGRESS_CONTAINER"


def subprocess_env(*, keep: Collection[str] = (), strip: tuple[str, ...] = ("CAGE_",)) -> dict[str, str]:
    """`os.environ` without the variables starting with one of `strip`, except those in `keep`, and
    with `CAGE_FORKSERVER=off`: a fork server of whoever runs the tests never serves a test's
    `cage run` (the fork server's own tests turn it on)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(strip) or k in keep}
    return {**env, "CAGE_FORKSERVER": "off"}
