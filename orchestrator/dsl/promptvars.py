"""Yao's prompt variables, replaced when a turn's prompts are built (as Yao's `Prompts.Parse`).

`$SYS.TIME`, `DATE`, `DATETIME`, `TIMEZONE`, `WEEKDAY`, `YEAR`, `MONTH`, `DAY`, `HOUR`, `MINUTE`,
`SECOND`, `UNIX` (an unknown `$SYS.X` stays as written); `$ENV.NAME` (empty when unset, as in Yao;
the value goes to the model, so only name variables meant for it); `$CTX.key` from the turn's
context (empty when absent). Yao's own sample global prompt (`Current Time: $SYS.DATETIME`) relies
on this.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from orchestrator.dsl.package import Prompt

_SYS = re.compile(r"\$SYS\.([A-Z_]+)")
_ENV = re.compile(r"\$ENV\.([A-Za-z_][A-Za-z0-9_]*)")
_CTX = re.compile(r"\$CTX\.([A-Za-z_][A-Za-z0-9_]*)")
SYSTEM: Mapping[str, Callable[[datetime], str]] = {
    "TIME": lambda t: t.strftime("%H:%M:%S"),
    "DATE": lambda t: t.strftime("%Y-%m-%d"),
    "DATETIME": lambda t: t.strftime("%Y-%m-%d %H:%M:%S"),
    "TIMEZONE": lambda t: t.tzname() or "UTC",
    "WEEKDAY": lambda t: t.strftime("%A"),
    "YEAR": lambda t: t.strftime("%Y"),
    "MONTH": lambda t: t.strftime("%m"),
    "DAY": lambda t: t.strftime("%d"),
    "HOUR": lambda t: t.strftime("%H"),
    "MINUTE": lambda t: t.strftime("%M"),
    "SECOND": lambda t: t.strftime("%S"),
    "UNIX": lambda t: str(int(t.timestamp())),
}


def expand_text(
    text: str, *, environ: Mapping[str, str], context: Mapping[str, str], now: datetime | None = None
) -> str:
    if "$" not in text:
        return text
    moment = now or datetime.now().astimezone()

    def system(match: re.Match[str]) -> str:
        fn = SYSTEM.get(match.group(1))
        return fn(moment) if fn is not None else match.group(0)

    text = _SYS.sub(system, text)
    text = _ENV.sub(lambda m: environ.get(m.group(1), ""), text)
    return _CTX.sub(lambda m: context.get(m.group(1), ""), text)


def expand_prompts(
    prompts: Sequence[Prompt],
    *,
    environ: Mapping[str, str],
    context: Mapping[str, str],
    now: datetime | None = None,
) -> tuple[Prompt, ...]:
    """`prompts` with `$SYS.`, `$ENV.` and `$CTX.` variables replaced in their content."""
    return tuple(
        p.model_copy(update={"content": expand_text(p.content, environ=environ, context=context, now=now)})
        for p in prompts
    )
