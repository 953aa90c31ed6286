"""`RunnerOptions`: the base of every runner's `runner.options` model (sandbox.yao), and its one
parser. A bad value (and, unless the runner ignores them, an unknown key) is a `ConfigError`
naming `sandbox.yao` and the key path, as `cage validate` reports it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.errors import ConfigError, ConfigErrors

log = structlog.get_logger(__name__)

FILE = "sandbox.yao"
PREFIX = "runner.options"


class RunnerOptions(BaseModel):
    """Frozen, documented per field; unknown keys are an error unless a runner sets
    `ignores_unknown` (they are then logged at debug and dropped)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    ignores_unknown: ClassVar[bool] = False

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Self:
        """`runner.options` from sandbox.yao, validated.

        Raises:
            ConfigError: a bad value or an unknown key, its key path named (`ConfigErrors` when
                there are several).
        """
        values = dict(raw)
        if cls.ignores_unknown:
            unknown = sorted(set(values) - set(cls.model_fields))
            if unknown:
                log.debug("runner.options_ignored", options=cls.__name__, keys=unknown)
                values = {k: v for k, v in values.items() if k in cls.model_fields}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            errors = [
                ConfigError(
                    err["msg"],
                    file=FILE,
                    key_path=".".join([PREFIX, *(str(p) for p in err["loc"])]),
                )
                for err in exc.errors()
            ]
            raise (errors[0] if len(errors) == 1 else ConfigErrors(errors)) from exc
