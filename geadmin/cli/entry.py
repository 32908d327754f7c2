"""The `geadmin` console script: the command's modules are imported with Ctrl-C held back.

Importing every sub-command (tritonclient, grpc, numpy, protobuf) takes the better part of a
second. A Ctrl-C in it printed Python's traceback, and one landing inside a C extension's own
set-up crashed the interpreter (SIGSEGV, seen here). Nothing has happened yet then: SIGINT is
blocked for the imports, and one that arrived meanwhile is delivered after them, ending the
command quietly with 130, as a Ctrl-C during a command does (`geadmin.cli.main`)."""

from __future__ import annotations

import signal

INTERRUPTED = 130  # ExitCode.INTERRUPTED, not imported: that import is what this guards


def main() -> int:
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        from geadmin.cli.main import main as run
    except KeyboardInterrupt:  # taken by another thread the imports started, raised here all the same
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return INTERRUPTED
    except BaseException:  # a broken install: its own error, with Ctrl-C working again
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a Ctrl-C held meanwhile lands here
    except KeyboardInterrupt:
        return INTERRUPTED  # the command never started
    return run()
