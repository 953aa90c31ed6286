"""The codex runner: Codex CLI (`codex exec --json`) in its container, translated to protocol events."""

from runners.codex.adapter import CLI_VERSION, CodexAdapter
from runners.codex.config import CodexConfig, build_config
from runners.codex.options import CodexOptions
from runners.codex.translator import CodexTranslator

__all__ = ["CLI_VERSION", "CodexAdapter", "CodexConfig", "CodexOptions", "CodexTranslator", "build_config"]
