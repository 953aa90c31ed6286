"""The scenarios a server knows, which one a request plays, and the failure counters."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from tests.fakes.model_server.scenario import BUILTIN, Scenario, Step, scenario


class UnknownScenarioError(LookupError):
    """A request named a scenario the server does not have."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown scenario {name!r}; register it with add_scenario()")


def scenario_name(model: str) -> str | None:
    """The scenario a model name asks for: `scenario:<name>` or `<anything>@<name>`; else None."""
    if model.startswith("scenario:"):
        return model.removeprefix("scenario:")
    if "@" in model:
        return model.rsplit("@", 1)[1]
    return None


class ScenarioRegistry:
    """Thread-safe: tests add scenarios while the server thread plays them."""

    def __init__(self, default: Scenario | str = "hello") -> None:
        self._lock = threading.Lock()
        self._scenarios: dict[str, Scenario] = dict(BUILTIN)
        self._failures: dict[tuple[str, int], int] = {}
        self._default = self._coerce(default)

    def _coerce(self, value: Scenario | str | Sequence[Step | Mapping[str, Any]]) -> Scenario:
        if isinstance(value, Scenario):
            return value
        if isinstance(value, str):
            with self._lock:
                if value not in self._scenarios:
                    raise UnknownScenarioError(value)
                return self._scenarios[value]
        return scenario("default", [s if isinstance(s, Step) else dict(s) for s in value])

    def add(self, value: Scenario) -> None:
        """Register (or replace) a named scenario; its failure counters start again."""
        with self._lock:
            self._scenarios[value.name] = value
            self._failures = {k: v for k, v in self._failures.items() if k[0] != value.name}

    def set_default(self, value: Scenario | str | Sequence[Step | Mapping[str, Any]]) -> Scenario:
        """Make a scenario (object, registered name or list of steps) the default; it is registered too."""
        chosen = self._coerce(value)
        self.add(chosen)
        with self._lock:
            self._default = chosen
        return chosen

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._scenarios)

    def resolve(self, model: str) -> Scenario:
        """The scenario for a request's model name.

        Raises:
            UnknownScenarioError: the model names a scenario that is not registered.
        """
        name = scenario_name(model)
        with self._lock:
            if name is None:
                return self._default
            if name not in self._scenarios:
                raise UnknownScenarioError(name)
            return self._scenarios[name]

    def take_failure(self, name: str, index: int, step: Step) -> bool:
        """Whether this request of step `index` fails; counts failures against `fail_times`."""
        if step.fail_status is None:
            return False
        with self._lock:
            used = self._failures.get((name, index), 0)
            if step.fail_times is not None and used >= step.fail_times:
                return False
            self._failures[(name, index)] = used + 1
            return True

    def reset_failures(self) -> None:
        with self._lock:
            self._failures.clear()
