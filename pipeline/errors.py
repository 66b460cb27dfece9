"""Expected failures, each named precisely: what is wrong, where, and how to fix it."""


class UsageProblem(Exception):
    """Bad arguments, a bad prompt file, a bad sidecar: say what and where; nothing was written (exit 2)."""


class SetupProblem(Exception):
    """The project's own files or folders cannot be used as they are: a symlink or a FIFO where
    qwenpipe keeps a file, a file where it keeps a folder, a folder it may not write. Say what
    and how to fix it (exit 1, like any other failure that needs a person). Never a bug."""
