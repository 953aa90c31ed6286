"""Files Cage writes into a box: by the files' own (non-root) owner with GNU tar, never through a
symlink the agent planted (`SandboxBackend.put_files`).

`PUT_SCRIPT` extracts a tar read from stdin into a directory it refuses to reach through a link;
tar replaces an existing link on a member's path instead of following it. `PUT_THEN_EXEC` does
the same ahead of a command, in the process that then becomes the command (`ExecSpec.files`): the
tar comes in an environment variable the script drops before it `exec`s, and a status line tells
the backend whether the command runs. One `docker exec` instead of two: 35–40 ms of every runner
turn that writes files for its CLI.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.errors import SandboxError
from orchestrator.sandbox.backend import FileEntry
from orchestrator.sandbox.limits import SANDBOX_GID, SANDBOX_UID, SANDBOX_USER

_INTO = 'mkdir -p -- "$d" 2>/dev/null; cd -P -- "$d" 2>/dev/null || exit 4; [ "$(pwd -P)" = "$d" ] || exit 3'
"""Into `$d`, refused (3) when it is or passes through a symlink, or (4) cannot be made."""
_EXTRACT = "tar -x -p --no-same-owner -f -"
PUT_SCRIPT = f'd="$1"; {_INTO}; exec {_EXTRACT}'
"""Runs as the files' owner: refuse a destination reached through a symlink, then extract stdin."""
FILES_VAR = "CAGE_PUT_FILES"
"""The variable `PUT_THEN_EXEC` finds the base64 of the tar in; the command never sees it."""
PUT_MARKER = b"cage-put"
PUT_THEN_EXEC = (
    f'd="$1"; shift; t="${FILES_VAR}"; unset {FILES_VAR}; '
    f'( {_INTO}; printf %s "$t" | base64 -d | {_EXTRACT} ); '
    f'c=$?; echo "{PUT_MARKER.decode()} $c"; [ "$c" = 0 ] || exit "$c"; exec "$@"'
)
"""`sh -c PUT_THEN_EXEC cage-put <dir> <argv...>`: extract, print `cage-put <status>`, then become
`argv` (only when the status is 0)."""
INLINE_MAX_BYTES = 64 * 1024
"""The largest tar sent inline: its base64 (87 KiB) stays under Linux's 128 KiB for one variable.
A larger one goes in an exec of its own first."""


def one_owner(sandbox: str, files: Sequence[FileEntry]) -> tuple[int, int]:
    """The uid and gid every file has.

    Raises:
        SandboxError: the files have more than one owner (one writer writes them all).
    """
    owners = {(entry.uid, entry.gid) for entry in files}
    if len(owners) != 1:
        raise SandboxError(sandbox, "put_files needs one owner for all files")
    return owners.pop()


def put_error(sandbox: str, dest_dir: str, code: int, stderr: bytes) -> SandboxError:
    """What a failed extraction into `dest_dir` says, from its exit code and stderr."""
    reason = {3: "it is (or passes through) a symlink", 4: "it cannot be created"}.get(
        code, stderr.decode(errors="replace").strip()
    )
    return SandboxError(sandbox, f"cannot write files into {dest_dir}: {reason[-300:]}")


def user_ids(user: str) -> tuple[int, int] | None:
    """The uid and gid an exec's `user` runs as, when it says so: `uid:gid`, or the images' own
    `sandbox` user; None for anything else (a name, the image's default)."""
    if user == SANDBOX_USER:
        return SANDBOX_UID, SANDBOX_GID
    uid, sep, gid = user.partition(":")
    if sep and uid.isdigit() and gid.isdigit():
        return int(uid), int(gid)
    return None
