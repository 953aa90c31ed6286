"""CLI start-up bench (issue 14, target 1), measured in one run.

1. **Start-up**: `cage --help` against `python -c "import typer, rich"` (the floor any typer CLI
   pays), as a ratio of medians; target ≤ 2×. `cage --version`, `cage validate` and
   `cage assistants --json` on this repository's app are listed for reference.

Usage: `.venv/bin/python bench/cli.py [--runs 7]`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAGE = [sys.executable, "-m", "orchestrator.cli"]
TARGET_HELP_RATIO = 2.0
"""Issue 14, target 1: `cage --help` takes at most twice `import typer, rich`."""


def timed(argv: Sequence[str], *, runs: int, cwd: Path = ROOT, env: dict[str, str] | None = None) -> float:
    """Median wall-clock seconds of `argv` over `runs` runs (after one warm-up run)."""
    samples: list[float] = []
    for i in range(runs + 1):
        start = time.perf_counter()
        result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        elapsed = time.perf_counter() - start
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr[-500:]}")
        if i:
            samples.append(elapsed)
    return statistics.median(samples)


def start_up(runs: int) -> bool:
    baseline = timed([sys.executable, "-c", "import typer, rich"], runs=runs)
    help_s = timed([*CAGE, "--help"], runs=runs)
    ratio = help_s / baseline
    label = 'python -c "import typer, rich"'
    print(f"{label:32} {baseline * 1000:7.0f} ms  (baseline)")
    print(f"{'cage --help':32} {help_s * 1000:7.0f} ms  {ratio:4.2f}x  (target <= {TARGET_HELP_RATIO}x)")
    for args in (["--version"], ["validate"], ["assistants", "--json"]):
        seconds = timed([*CAGE, *args], runs=runs)
        print(f"{'cage ' + ' '.join(args):32} {seconds * 1000:7.0f} ms  {seconds / baseline:4.2f}x")
    return ratio <= TARGET_HELP_RATIO


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="Timed runs per command (median).")
    args = parser.parse_args(argv)
    return 0 if start_up(args.runs) else 1


if __name__ == "__main__":
    sys.exit(main())
