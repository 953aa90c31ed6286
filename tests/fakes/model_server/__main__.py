"""Run the fake model server standalone.

python -m tests.fakes.model_server --port P --scenario FILE.json [--add OTHER.json] [--log requests.jsonl]
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from tests.fakes.model_server.scenario import BUILTIN, Scenario, load_scenario
from tests.fakes.model_server.server import FakeModelServer


def _scenario(value: str) -> Scenario:
    if value in BUILTIN:
        return BUILTIN[value]
    return load_scenario(Path(value))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.model_server", description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on start)")
    parser.add_argument(
        "--scenario", default="hello", help=f"a JSON scenario file or a built-in name ({', '.join(BUILTIN)})"
    )
    parser.add_argument(
        "--add", action="append", default=[], metavar="FILE", help="register another scenario file by name"
    )
    parser.add_argument("--log", type=Path, help="append every request as a JSON line to this file")
    args = parser.parse_args(argv)

    server = FakeModelServer(_scenario(args.scenario), host=args.host, port=args.port, log_path=args.log)
    for extra in args.add:
        found = load_scenario(Path(extra))
        server.add_scenario(found.name, found)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with server:
        sys.stdout.write(f"fake model server listening on {server.url}\n")
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
