"""Errors that mean "the command cannot run as asked" (exit 2): bad input, named precisely."""


class UsageProblem(Exception):
    """Bad arguments, a bad prompt file, a bad sidecar: say what and where; nothing was written."""
