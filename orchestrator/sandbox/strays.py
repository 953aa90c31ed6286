"""Which processes in an idle sandbox are strays: everything the turns left that Cage did not keep.

A turn's exec runs in its own process group and is killed as a group, but an agent can leave the
group (`setsid`, `nohup sh -c ... &` from a tool that exits) and its processes are reparented to
the box's init. When a long-lived box goes idle, the manager lists every process and kills all
but these (`stray_pids`):

* pid 1 (the engine's init) and the box's main process (the oldest child of pid 1: no process
  started later can be older) with its own children;
* survivors Cage started on purpose: background `prepare` steps, recorded by (pid, start time) in
  the orchestrator's memory, where the agent cannot add to them;
* resident servers a runner keeps between turns (`RESIDENT`): a process whose executable is the
  runner's image binary (a path the agent cannot write) started in server mode, e.g. opencode's
  `serve`; the agent's tools in an opencode box run inside that server by design;
* and every descendant of a kept process.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from orchestrator.sandbox.backend import ProcessInfo

RESIDENT: Mapping[str, tuple[tuple[str, str], ...]] = {
    "opencode": (("/usr/local/bin/opencode", "serve"),),
}
"""Runner -> (executable, first argument) of the resident servers its boxes keep between turns."""


def _resident(proc: ProcessInfo, rules: Sequence[tuple[str, str]]) -> bool:
    return any(proc.exe == exe and proc.argv[1:2] == (arg,) for exe, arg in rules)


def stray_pids(
    procs: Iterable[ProcessInfo],
    *,
    survivors: Iterable[tuple[int, int]] = (),
    resident: Sequence[tuple[str, str]] = (),
) -> list[int]:
    """The pids to kill, given every process of the box and what Cage keeps (module docstring)."""
    table = {proc.pid: proc for proc in procs}
    kept = set(survivors)
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    roots = [pid for pid, proc in table.items() if (pid, proc.start) in kept or _resident(proc, resident)]
    under_init = [table[pid] for pid in children.get(1, [])]
    if under_init:
        roots.append(min(under_init, key=lambda proc: (proc.start, proc.pid)).pid)
    keep = {1}
    while roots:
        pid = roots.pop()
        if pid not in keep:
            keep.add(pid)
            roots.extend(children.get(pid, []))
    return sorted(pid for pid in table if pid not in keep)
