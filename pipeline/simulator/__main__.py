"""`python -m pipeline.simulator`: serve the simulator until Ctrl-C, printing its base URL.

The same options, defaults and checks as `qwenpipe simulate` (pipeline/simulator/options.py).
"""

from __future__ import annotations

import argparse
import sys

from ..errors import UsageProblem
from ..exitcodes import ExitCode
from .options import SimulatorOptions, option_specs, serve


def parse_args(argv: list[str] | None = None) -> SimulatorOptions:
    parser = argparse.ArgumentParser(prog="python -m pipeline.simulator", description=__doc__)
    for spec in option_specs():
        shown = f"{spec.help} (default: %(default)s)"
        if spec.type is bool:
            parser.add_argument(
                spec.flag, action=argparse.BooleanOptionalAction, default=spec.default, help=shown
            )
        else:
            choices = spec.choices or None
            parser.add_argument(spec.flag, type=spec.type, default=spec.default, choices=choices, help=shown)
    return SimulatorOptions(**vars(parser.parse_args(argv)))


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    try:
        serve(options, announce=lambda sim: print(sim.base_url, flush=True))
    except UsageProblem as problem:
        print(f"python -m pipeline.simulator: {problem}", file=sys.stderr)
        return ExitCode.USAGE
    return ExitCode.DONE


if __name__ == "__main__":
    sys.exit(main())
