"""A wheel of Cage, installed into a clean virtualenv away from any checkout, builds runner images.

The image contexts travel as package data (`orchestrator/images`), so the tag the installed `cage`
computes is the one the checkout computes: same bytes, same identity. Dependencies come from the
test's own environment (a `.pth` line) rather than a second download of the whole lock.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.subprocess_env import subprocess_env

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _tracked_copy(dest: Path) -> Path:
    """The work tree (tracked and new files, symlinks kept as links), without ignored build leftovers."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source, target = ROOT / name, dest / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(source.readlink())
        else:
            shutil.copy2(source, target)
    return dest


def _clean_env() -> dict[str, str]:
    return subprocess_env(strip=("CAGE_", "VIRTUAL_ENV"))


def test_an_installed_wheel_builds_the_same_tools_image(tmp_path: Path) -> None:
    src = _tracked_copy(tmp_path / "src")
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w", str(wheels)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    [wheel] = wheels.glob("cage-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    site = Path(
        subprocess.run(
            [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        [
            venv / "bin" / "python",
            "-c",
            "from orchestrator.sandbox.images import default_images_dir as d;"
            "import orchestrator; print(d().resolve()); print(orchestrator.__file__)",
        ],
        cwd=elsewhere,
        env=_clean_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(p).is_relative_to(site) for p in where), where  # not the checkout's files

    installed = subprocess.run(
        [venv / "bin" / "cage", "images", "build", "tools"],
        cwd=elsewhere,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    checkout = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "images", "build", "tools"],
        cwd=ROOT,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert checkout.returncode == 0, checkout.stderr[-2000:]
    tag = installed.stdout.split()[-1]
    assert tag.startswith("cage/tools:")
    assert tag == checkout.stdout.split()[-1]
