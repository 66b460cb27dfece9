"""The environment the benchmarks run qwenpipe in: as a user's install has it.

`pip install` compiles every module to bytecode, and a user's shell does not set
PYTHONDONTWRITEBYTECODE; this sandbox does, so without this each timed command would compile
qwenpipe's ~40 modules from source again (about a quarter of a second) and measure that.
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pipeline"

ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
ENV["NO_COLOR"] = "1"


def compile_package() -> None:
    """Bytecode for the package, as pip writes it at install time (kept in __pycache__)."""
    compileall.compile_dir(str(PACKAGE), quiet=1)


compile_package()
