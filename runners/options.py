"""`RunnerOptions`: the base of every runner's `runner.options` model (sandbox.yao), and its one
parser. A bad value or an unknown key is a `ConfigError` naming `sandbox.yao` and the key path,
as `cage validate` reports it: an option Cage accepts always has an effect."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.attribute_docs import describe_fields
from orchestrator.errors import ConfigError, ConfigErrors

FILE = "sandbox.yao"
PREFIX = "runner.options"


class RunnerOptions(BaseModel):
    """Frozen, documented per field; unknown keys are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=describe_fields)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Self:
        """`runner.options` from sandbox.yao, validated.

        Raises:
            ConfigError: a bad value or an unknown key, its key path named (`ConfigErrors` when
                there are several).
        """
        try:
            return cls.model_validate(dict(raw))
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
