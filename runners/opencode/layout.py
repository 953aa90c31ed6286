"""Where opencode's files live inside the sandbox: all under the workspace, so a recreated
container still finds its sessions (sqlite in `$XDG_DATA_HOME/opencode`) and its config."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.errors import RunnerError
from runners.base import STATE_SUBDIR, TurnRequest

DEFAULT_ROOT = "/workspace"
_STATE_SUFFIX = f"/{STATE_SUBDIR}"


@dataclass(frozen=True)
class Layout:
    """Absolute paths of one turn (inside the container) and the workspace root they hang from."""

    root: str
    home: str
    state: str

    @classmethod
    def of(cls, turn: TurnRequest) -> Layout:
        """The layout of `turn`.

        The workspace root is not part of the turn; the pipeline puts the state dir at
        `<root>/.cage-state/runner`, so the root is read back from it (`/workspace` otherwise).
        """
        state_dir = turn.state_dir.rstrip("/")
        root = state_dir.removesuffix(_STATE_SUFFIX) if state_dir.endswith(_STATE_SUFFIX) else DEFAULT_ROOT
        return cls(root=root or "/", home=turn.home.rstrip("/"), state=f"{state_dir}/opencode")

    @property
    def config_home(self) -> str:
        return f"{self.home}/.config"

    @property
    def data_home(self) -> str:
        return f"{self.home}/.local/share"

    @property
    def cache_home(self) -> str:
        return f"{self.home}/.cache"

    @property
    def state_home(self) -> str:
        return f"{self.home}/.local/state"

    @property
    def config_file(self) -> str:
        return f"{self.state}/opencode.json"

    @property
    def instructions_file(self) -> str:
        return f"{self.state}/instructions.md"

    @property
    def driver_file(self) -> str:
        return f"{self.state}/serve_driver.py"

    @property
    def plugin_dir(self) -> str:
        """opencode's per-config-dir plugin folder; a `node_modules/` plus a lock file naming
        `@opencode-ai/plugin` there stop its background `npm install` (reference/clis.md §2)."""
        return f"{self.config_home}/opencode"

    def relative(self, path: str) -> str:
        """`path` relative to the workspace root (what `FileWrite.path` wants).

        Raises:
            RunnerError: the path lies outside the workspace.
        """
        prefix = self.root.rstrip("/") + "/"
        parts = path.removeprefix(prefix).split("/")
        if not path.startswith(prefix) or ".." in parts:
            raise RunnerError("opencode", f"{path!r} must lie inside the workspace {self.root}")
        return "/".join(p for p in parts if p)
