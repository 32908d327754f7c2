"""The one table of `geadmin`'s exit codes: every command exits with one of these, and
docs/reference/exit-codes.md is generated from this module (scripts/gen_docs.py), so the page
and the code cannot drift (tests/unit/test_exit_codes.py also checks that each command's module
uses exactly the codes its row lists).

A code means one thing everywhere; what it stands for in each command is in `BY_COMMAND`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class ExitCode(enum.IntEnum):
    """`geadmin`'s exit codes; `MEANING` says each in one line."""

    OK = 0
    FAILED = 1
    USAGE = 2
    UNREACHABLE = 3
    DEGRADED = 4
    INTERNAL = 70  # sysexits' EX_SOFTWARE
    INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
    PIPE_CLOSED = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left


MEANING: dict[ExitCode, str] = {
    ExitCode.OK: "success: what was asked is done, or what was checked is healthy",
    ExitCode.FAILED: "the command ran, and what it did or checked failed; the cause is printed",
    ExitCode.USAGE: "bad usage or input: a flag the parser refuses, a setting or an argument geadmin "
                    "refuses, or any other geadmin error (its message names the cause and the next step)",
    ExitCode.UNREACHABLE: "nothing answers: Triton (also a port that speaks the other protocol), "
                          "Alertmanager, or no fleet server at all",
    ExitCode.DEGRADED: "it serves, but not as it should: a model failed, was dropped, is stuck or drifted; "
                       "a fleet server down or not seen (a discovery source down), or a model skewed",
    ExitCode.INTERNAL: "a bug in geadmin: one line with the error and a request to report it with the "
                       "file `geadmin bundle` writes (GEADMIN_DEBUG=1 prints the traceback instead)",
    ExitCode.INTERRUPTED: "interrupted with Ctrl-C (SIGINT)",
    ExitCode.PIPE_CLOSED: "the reader of the output left early (`geadmin audit | head -1`), as `cat` would",
}

# How bad a health code is, best first: a command over many servers exits with the worst.
WORSE = (ExitCode.OK, ExitCode.DEGRADED, ExitCode.FAILED, ExitCode.UNREACHABLE)


def worst(codes: Iterable[int]) -> int:
    """The worst of health exit codes (OK when there are none)."""
    return max(codes, key=WORSE.index, default=ExitCode.OK)


# Codes every command can exit with, set by `geadmin.cli.main` around the command itself.
EVERY_COMMAND = (ExitCode.USAGE, ExitCode.INTERNAL, ExitCode.INTERRUPTED, ExitCode.PIPE_CLOSED)

# Command module (geadmin/cli/<module>.py) -> its commands, and what each code it returns itself
# (besides EVERY_COMMAND) means there.
BY_COMMAND: dict[str, tuple[str, dict[ExitCode, str]]] = {
    "status": ("status", {
        ExitCode.OK: "OK",
        ExitCode.DEGRADED: "DEGRADED: Triton serves, but a model failed to load, lost READY without an "
                           "operator's unload, is stuck LOADING/UNLOADING, or serves a config that differs "
                           "from its file on disk, or an NPU fault needs action (a model it left with no "
                           "healthy instance is named DOWN); `--fleet`: also a source that did not answer or "
                           "left servers out (`--strict` makes it 1)",
        ExitCode.FAILED: "DOWN: Triton answers but is not live, or a model named with `--expect` is not "
                         "READY or has no healthy instance left after an NPU fault",
        ExitCode.UNREACHABLE: "DOWN: Triton does not answer, or `--fleet` found no server; `--all` and "
                              "`--fleet` exit with the worst (0, 4, 1, 3)",
    }),
    "models": ("models list, models load, models unload, models reload, models create", {
        ExitCode.OK: "every named model ended as asked",
        ExitCode.FAILED: "a model did not (the cause and the next step are printed)",
        ExitCode.UNREACHABLE: "Triton does not answer",
    }),
    "config": ("config validate, config history", {
        ExitCode.OK: "validate: no errors (warnings may be printed); history: listed",
        ExitCode.FAILED: "validate: the validator found errors; history: the revisions or the file cannot "
                         "be read (the cause is printed)",
    }),
    "config_change": ("config apply, config rollback", {
        ExitCode.OK: "applied, rolled back, or nothing to do; apply --preview: GO",
        ExitCode.FAILED: "a change refused, rejected by Triton (and the previous config put back), or whose "
                         "load had not finished at the load timeout (the new config stays: Triton is "
                         "loading it); apply --preview: NO-GO, or the preview could not run (the cause is "
                         "printed)",
        ExitCode.UNREACHABLE: "Triton does not answer",
    }),
    "audit_log": ("audit", {
        ExitCode.OK: "the entries were printed or written",
        ExitCode.FAILED: "the audit log cannot be read or the file written",
    }),
    "infer": ("infer", {
        ExitCode.OK: "the request answered",
        ExitCode.FAILED: "Triton refused the request",
        ExitCode.UNREACHABLE: "Triton does not answer",
    }),
    "bench": ("bench", {
        ExitCode.OK: "the load test measured, or the list was printed",
        ExitCode.FAILED: "the load test failed (perf_analyzer missing, no stable measurement, ...), or "
                         "another load test holds the server",
        ExitCode.UNREACHABLE: "Triton does not answer",
    }),
    "tune": ("tune", {
        ExitCode.OK: "a winner under the constraints, or the run applied; several models or --npu: a joint "
                     "choice that fits (and, --apply, every model applied)",
        ExitCode.FAILED: "no winner, or the winner not applied; several models or --npu: no combination "
                         "fits, or --apply stopped at a model (the ones applied are said)",
    }),
    "traffic": ("traffic capture", {
        ExitCode.OK: "at least 2 arrivals of the model were recorded (a replay needs intervals)",
        ExitCode.FAILED: "fewer arrivals, or Triton has no trace file readable here (the flags to add are "
                         "printed)",
        ExitCode.UNREACHABLE: "Triton does not answer",
    }),
    "capacity": ("capacity", {
        ExitCode.OK: "every model with an objective has its headroom and is not forecast to saturate "
                     "within the horizon (a model without an objective or a measured rate is said, not "
                     "judged)",
        ExitCode.DEGRADED: "a model's headroom is under --min-headroom, or its recorded peak is forecast to "
                           "reach its saturation rate within --horizon-days (or already does); with --fleet, "
                           "also a member that does not answer",
        ExitCode.UNREACHABLE: "Triton does not answer; with --fleet, no member answers",
    }),
    "probe": ("probe", {
        ExitCode.OK: "every probe answered",
        ExitCode.FAILED: "a probe failed; a fleet exits with its worst server's code (0, 4, 1, 3)",
        ExitCode.UNREACHABLE: "Triton does not answer",
        ExitCode.DEGRADED: "`--fleet --once`: every server probed answered, but a discovery source did not "
                           "answer or left servers out (named on the first line)",
    }),
    "alerts": ("alerts", {
        ExitCode.OK: "no alert firing",
        ExitCode.FAILED: "alerts firing",
        ExitCode.UNREACHABLE: "Alertmanager does not answer",
    }),
    "fleet": ("fleet status, fleet load, fleet unload, fleet reload, fleet apply, fleet version, "
              "fleet restore, fleet resume", {
        ExitCode.OK: "the same everywhere, every gate passed, or restored",
        ExitCode.FAILED: "a rollout stopped at a gate (and put the servers back), or a restore failed",
        ExitCode.UNREACHABLE: "no server found, or none answers",
        ExitCode.DEGRADED: "a server down or not ready, a model failed or skewed, or a source that did not "
                           "answer or left servers out (its servers are not seen)",
    }),
    "npu": ("npu", {
        ExitCode.OK: "the NPUs were listed",
        ExitCode.FAILED: "an NPU source that was asked for gave no devices",
    }),
    "npu_faults": ("npu faults", {
        ExitCode.OK: "nothing needs action (a NotHandleFault or a subhealth code alone is shown, not "
                     "alarmed; a cleared fault never counts)",
        ExitCode.DEGRADED: "a fault needs action (a level above watching), or a chip is reported unhealthy "
                           "whatever its code",
        ExitCode.FAILED: "a model has no healthy instance left",
        ExitCode.UNREACHABLE: "a fault source asked for does not answer, no fault source answered at all "
                              "(nothing rules a fault out), or the fleet has no server",
    }),
    "npu_remedy": ("npu remedy", {
        ExitCode.OK: "the plan of every fault on the chip was shown (dry run) or every step applied",
        ExitCode.FAILED: "no fault present on the chip, or a step failed or was refused (the reason is "
                         "printed)",
    }),
    "top": ("top", {
        ExitCode.OK: "stopped with Ctrl-C, or the rounds asked for were shown",
        ExitCode.FAILED: "Triton's metrics cannot be read",
    }),
    "sampler": ("sampler", {
        ExitCode.OK: "stopped as asked; `--check`: a sample newer than three intervals",
        ExitCode.FAILED: "`--check`: no recent sample",
    }),
    "objectives": ("objectives", {ExitCode.OK: "set, cleared or listed"}),
    "users": ("users add, users passwd, users role, users remove, users list",
              {ExitCode.OK: "the user added, changed, removed or listed"}),
    "bundle": ("bundle", {ExitCode.OK: "the bundle written"}),
    "dashboard": ("dashboard", {ExitCode.OK: "the sign-in link printed, or the dashboard stopped"}),
    "stack": ("stack", {
        ExitCode.OK: "the services listed, or the driver asked to restart, stop or start the service",
        ExitCode.FAILED: "the change was refused: declined at the terminal, or no terminal and no --yes",
    }),
    "up": ("up", {
        ExitCode.OK: "stopped as asked, also a start given up because a stop was asked; otherwise the "
                     "stack's own end is passed through (128 + the signal that interrupted the start-up)",
    }),
}


def help_text(module: str) -> str:
    """The codes of one command as a sentence for its `--help` (from the table: said once)."""
    _, codes = BY_COMMAND[module]
    said = "; ".join(f"{int(code)} {text}" for code, text in codes.items())
    return f"Exit codes: {said}; 2 bad usage (every code: docs/reference/exit-codes.md)."
