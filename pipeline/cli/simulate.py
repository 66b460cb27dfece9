"""`qwenpipe simulate`: the loopback replica of the site and the router, its options defined once
(pipeline/simulator/options.py) for this command line and for `python -m pipeline.simulator`."""

from __future__ import annotations

import inspect
from typing import Annotated, Literal

import typer

from ..console import out, say


def simulate_command(**given) -> None:
    """Serve a loopback replica of chat.qwen.ai and a 9router-like router until Ctrl-C."""
    from ..simulator.options import SimulatorOptions, serve

    def announce(sim) -> None:
        out().print(sim.base_url, markup=False)
        say(f"simulator on {sim.base_url} (chat) and {sim.base_url}/v1 (router); Ctrl-C stops it")

    serve(SimulatorOptions(**given), announce=announce)


def _typer_signature(specs) -> inspect.Signature:
    """A command's parameters from option specs (the simulator's options are defined once, in
    pipeline/simulator/options.py, for this command line and for `python -m pipeline.simulator`)."""
    params = []
    for spec in specs:
        kind = Literal[spec.choices] if spec.choices else spec.type
        if spec.default is None:
            kind = kind | None
        if spec.choices:  # named in the help text: as a metavar they would not fit on a line
            option = typer.Option(spec.flag, help=f"{spec.help}: {', '.join(spec.choices)}", metavar="NAME")
        elif spec.type is bool and spec.default:  # on unless turned off
            option = typer.Option(f"{spec.flag}/--no-{spec.flag[2:]}", help=spec.help)
        else:
            option = typer.Option(spec.flag, help=spec.help)
        params.append(
            inspect.Parameter(
                spec.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=spec.default,
                annotation=Annotated[kind, option],
            )
        )
    return inspect.Signature(params, return_annotation=None)


def _with_options() -> None:
    """simulate_command's parameters: the simulator's options, for Typer to read."""
    from ..simulator.options import option_specs

    simulate_command.__signature__ = _typer_signature(option_specs())


_with_options()
