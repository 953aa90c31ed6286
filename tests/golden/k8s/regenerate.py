"""Rewrite the golden Kubernetes objects: `python -m tests.golden.k8s.regenerate` (then review the diff)."""

from __future__ import annotations

from tests.golden.k8s.cases import HERE, cases, render


def main() -> None:
    for name, obj in cases().items():
        (HERE / name).write_text(render(obj))
        print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()
