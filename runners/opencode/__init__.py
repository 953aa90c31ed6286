"""The opencode runner: `opencode run --format json` per turn, or one `opencode serve` per
container driven over HTTP + SSE by a small driver script shipped with each turn."""

from runners.opencode.adapter import OpencodeAdapter
from runners.opencode.config import OpencodeConfig, build_config
from runners.opencode.invocation import RESUME_KEY, build_opencode_exec, drive_for
from runners.opencode.options import OpencodeOptions
from runners.opencode.run_translator import RunTranslator
from runners.opencode.serve_translator import ServeTranslator

__all__ = [
    "RESUME_KEY",
    "OpencodeAdapter",
    "OpencodeConfig",
    "OpencodeOptions",
    "RunTranslator",
    "ServeTranslator",
    "build_config",
    "build_opencode_exec",
    "drive_for",
]
