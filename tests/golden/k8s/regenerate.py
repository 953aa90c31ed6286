"""Rewrite the golden Kubernetes objects: `python -m tests.golden.k8s.regenerate` (then review the diff)."""

from __future__ import annotations

from tests.golden.k8s.cases import HERE, SQUID_GOLDEN, cases, render, squid_case


def main() -> None:
    for name, obj in cases().items():
        (HERE / name).write_text(render(obj))
        print(f"wrote {HERE / name}")
    (HERE / SQUID_GOLDEN).write_text(squid_case())
    print(f"wrote {HERE / SQUID_GOLDEN}")


if __name__ == "__main__":
    main()
