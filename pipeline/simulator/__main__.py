"""`python -m pipeline.simulator`: serve the simulator until Ctrl-C, printing its base URL."""

from __future__ import annotations

import argparse
import sys
import time

from pipeline.simulator.chats import API_SHAPES, SCENARIOS, UIS
from pipeline.simulator.server import Simulator


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pipeline.simulator", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="0 = any free port")
    parser.add_argument("--scenario", default="ok", choices=SCENARIOS)
    parser.add_argument("--api-shape", default="2026-08", choices=API_SHAPES)
    parser.add_argument("--answer-seconds", type=float, default=2.0)
    parser.add_argument("--thinking-seconds", type=float, default=0.5)
    parser.add_argument("--url-delay", type=float, default=0.3)
    parser.add_argument("--ui", default="current", choices=UIS)
    parser.add_argument("--ledger", default=None, help="rewrite this JSON file after each prompt")
    parser.add_argument("--require-login", action="store_true", help="pages need the sign-in cookie")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sim = Simulator(
        port=args.port,
        scenario=args.scenario,
        api_shape=args.api_shape,
        answer_seconds=args.answer_seconds,
        thinking_seconds=args.thinking_seconds,
        url_delay=args.url_delay,
        ui=args.ui,
        ledger_path=args.ledger,
        require_login=args.require_login,
    ).start()
    print(sim.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
