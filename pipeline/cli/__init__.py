"""The command line: parse, call the plain modules, map outcomes to exit codes."""
