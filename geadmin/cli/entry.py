"""The `geadmin` console script: the command's modules are imported under a Ctrl-C guard.

Importing every sub-command (tritonclient, numpy, protobuf) takes the better part of a second;
a Ctrl-C in it printed Python's traceback. Nothing has happened yet then: exit 130 quietly,
as a Ctrl-C during a command does (`geadmin.cli.main`)."""

from __future__ import annotations

INTERRUPTED = 130  # ExitCode.INTERRUPTED, not imported: that import could be the one interrupted


def main() -> int:
    try:
        from geadmin.cli.main import main as run
    except KeyboardInterrupt:
        return INTERRUPTED
    return run()
