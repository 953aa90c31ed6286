"""Path globs as regexes, one dialect for every place Cage matches paths: `**/` any folders (none
too), `**` anything, `*` and `?` within one folder, `[...]`/`[!...]` classes.

The permission rules match tool paths with it and the native loop's `glob` tool lists files with it,
so a rule and the tool read a pattern the same way.
"""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=512)
def path_glob(pattern: str) -> re.Pattern[str]:
    """`pattern` as a regex matching a whole POSIX path (`.match`/`fullmatch` alike: it ends in `\\Z`)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
                i += 1
                continue
            body = pattern[i + 1 : end]
            negated = body.startswith("!")
            inner = (body[1:] if negated else body).replace("\\", "\\\\").replace("[", "\\[")
            if inner.startswith("^"):
                inner = "\\" + inner
            out.append(f"[{'^' if negated else ''}{inner}]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)
