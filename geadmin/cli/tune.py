"""`geadmin tune MODEL`: search the model's serving config (max_batch_size, preferred batch
size, queue delay, instances) on trial copies under constraints, without touching the live
model; `--apply-run ID` hands a run's winner to the safe apply, on the server the run measured and
only while the config file is the one the run started from. `--list` / `--show ID` reopen saved runs.
`--objective`: the config that meets the model's objective (p99, error budget) at its recorded peak
request rate with the fewest instances (geadmin.ops.tune.objective); with several models or `--npu N`,
tuned together under their NPU's memory (geadmin.ops.tune.joint_run)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from geadmin import audit, settings
from geadmin.access import guard
from geadmin.access.guard import Authorization
from geadmin.cli.common import (
    add_connection_args,
    client_for,
    format_table,
    served_repository,
    target_from_args,
)
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import ConfigError, InvalidArgumentError, TuneRefusedError
from geadmin.interrupts import as_interrupts
from geadmin.ops.tune.apply import apply_winner
from geadmin.ops.tune.joint_run import JointRun, apply_joint, models_on_npu, placement, tune_jointly
from geadmin.ops.tune.memory import MIB
from geadmin.ops.tune.objective import ObjectivePlan, objective_plan, tune_to_objective
from geadmin.ops.tune.outcome import TuneResult
from geadmin.ops.tune.results import list_runs, load_run
from geadmin.ops.tune.search import TuneSettings, tune
from geadmin.stack.target import Target
from geadmin.telemetry.history.prometheus import PrometheusHistory
from geadmin.telemetry.history.reader import HistoryReader, open_history
from geadmin.triton.client import TritonClient


def trial_rows(trials: list[dict[str, Any]]) -> str:
    rows: list[tuple[str, ...]] = [("#", "phase", "max batch", "queue delay", "instances", "infer/s",
                                    "p50 ms", "p99 ms", "avg batch", "result")]
    for number, t in enumerate(trials, 1):
        rows.append((str(number), t["phase"], str(t["max_batch_size"]), f"{t['queue_delay_us'] / 1000:g} ms",
                     str(t["instances"]), _num(t["throughput"], 0), _num(t["p50_ms"], 1),
                     _num(t["p99_ms"], 1), _num(t["avg_batch"], 1),
                     "ok" if t["ok"] else f"failed: {t['error']}"))
    return format_table(rows)


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def limits(settings_: dict[str, Any]) -> str:
    """The run's limits as words: no limit is "no limit", never 0."""
    p99, throughput = settings_.get("max_p99_ms"), settings_.get("min_throughput")
    return (f"max p99: {f'{p99:g} ms' if p99 else 'no limit'}; "
            f"min throughput: {f'{throughput:g}/s' if throughput else 'no minimum'}")


def render(document: dict[str, Any]) -> str:
    lines = [f"{document['model']}: {document['headline']}  (run {document['id']}, "
             f"{document['seconds']:.0f} s)"]
    if document.get("kind") == "objective":
        lines.append(f"  on {document['server']}; objective: {document['objective']['text']}; "
                     f"measured at {document['rate_rps']:.3g} req/s")
        curve = ", ".join(f"{p['rate_rps']:.3g} req/s: p99 {_num(p['p99_ms'], 1)} ms"
                          f"{'' if p['meets'] else ' (misses)'}" for p in document["curve"])
        if curve:
            lines.append(f"  the winner's curve: {curve}")
    else:
        lines.append(f"  on {document['server']}; {limits(document['settings'])}")
    lines += [f"  note: {note}" for note in document["notes"]]
    lines.append(trial_rows(document["trials"]))
    if document["best"]:
        lines.append(f"apply it: geadmin tune {document['model']} --apply-run {document['id']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    home = settings.home()
    models, args.model = list(args.model), args.model[0] if args.model else ""
    if len(models) > 1 or args.npu is not None:
        return run_joint(args, models, home)
    if args.apply:
        raise InvalidArgumentError("--apply applies a joint choice (several models, or --npu N); one model's "
                                   "winner: geadmin tune MODEL --apply-run ID")
    if args.list:
        runs = list_runs(args.model or None, home=home)
        rows = [(str(r["id"]), r["at"], r["model"], r["headline"]) for r in runs]
        print(format_table([("id", "at (UTC)", "model", "result"), *rows]) if rows else "no tuning runs yet")
        return ExitCode.OK
    if args.show is not None:
        document = load_run(args.show, home=home)
        print(json.dumps(document, indent=2) if args.json else render(document))
        return ExitCode.OK
    if not args.model:
        raise InvalidArgumentError("name the model to tune: geadmin tune MODEL [--max-p99-ms X]")
    target = target_from_args(args)
    repository = served_repository(target, "writes its trial copy")
    auth, metrics = guard.os_user(), metrics_url(args, target)
    plan = objective_plan_for(args, target, home) if args.objective and args.apply_run is None else None
    with client_for(target, args) as client:
        if args.apply_run is not None:
            return _apply(client, repository, args, auth, home)
        with as_interrupts():  # SIGTERM ends it like Ctrl-C: the trial copy is removed
            result = _tune(client, target, repository, args, auth, home, plan, metrics)
    document = result.to_json()
    print(json.dumps(document, indent=2) if args.json else render(document))
    return ExitCode.OK if result.best else ExitCode.FAILED


def _tune(client: TritonClient, target: Target, repository: Path, args: argparse.Namespace,
          auth: Authorization, home: Path, plan: ObjectivePlan | None, metrics: str) -> TuneResult:
    if plan is not None:
        return tune_to_objective(client, repository, plan, auth=auth, home=home,
                                 budget_s=args.budget_s, admin_key=target.spec.admin_key,
                                 metrics_url=metrics, progress=progress)
    settings_ = TuneSettings(args.model, args.max_p99_ms, args.min_throughput, args.budget_s,
                             args.concurrency, args.window_ms)
    return tune(client, repository, settings_, auth=auth, home=home, admin_key=target.spec.admin_key,
                metrics_url=metrics, progress=progress)


def metrics_url(args: argparse.Namespace, target: Target) -> str:
    """--metrics-url, else the target's Triton metrics address."""
    if args.metrics_url is None:
        return target.urls().metrics
    try:
        return settings.parse_http_url(args.metrics_url)
    except ConfigError as exc:
        raise ConfigError(f"--metrics-url {exc}") from exc


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def history_for(prometheus_url: str | None, home: Path) -> HistoryReader:
    """--prometheus-url (or GEADMIN_PROMETHEUS_URL): that Prometheus; else the sampler's history."""
    if prometheus_url is None:
        return open_history(home)
    try:
        return PrometheusHistory(settings.parse_http_url(prometheus_url))
    except ConfigError as exc:
        raise ConfigError(f"--prometheus-url {exc}") from exc


def objective_plan_for(args: argparse.Namespace, target: Target, home: Path) -> ObjectivePlan:
    if args.max_p99_ms is not None or args.min_throughput is not None:
        raise InvalidArgumentError("--objective tunes to the model's own objective (geadmin objectives): "
                                   "drop --max-p99-ms / --min-throughput, or drop --objective")
    since = audit.parse_since(args.since)
    return objective_plan(args.model, history=history_for(args.prometheus_url, home), since=since,
                          source=target.urls().metrics, home=home, max_instances=args.max_instances,
                          window_ms=args.window_ms)


def render_joint(joint: JointRun) -> str:
    lines = [joint.choice.describe()]
    for result in joint.results:
        lines.append(f"  {result.model}: run {result.id}: {result.headline()}; on device(s) "
                     f"{', '.join(map(str, joint.devices[result.model])) or 'unknown'}")
    lines += [f"  device {d}: {room / MIB:.0f} MiB for the tuned models"
              for d, room in sorted(joint.room.items())]
    rows: list[tuple[str, ...]] = [("model", "max batch", "queue delay", "instances", "p99 ms", "memory MiB")]
    for pick in joint.choice.picks:
        c, t = pick.trial.candidate, pick.trial
        rows.append((pick.model, str(c.max_batch_size), f"{c.queue_delay_us / 1000:g} ms", str(c.instances),
                     f"{t.p99_ms:.1f}" if t.p99_ms is not None else "-", f"{pick.memory_bytes / MIB:.0f}"))
    if joint.choice.picks:
        lines.append(format_table(rows))
    return "\n".join(lines)


def run_joint(args: argparse.Namespace, models: list[str], home: Path) -> int:
    """Several models, or --npu N: tuned together under the memory of the NPUs they share."""
    if not args.objective or args.list or args.show is not None or args.apply_run is not None:
        raise InvalidArgumentError("several models, or --npu, are tuned together with --objective (no "
                                   "--list, --show or --apply-run): geadmin tune --objective MODEL_A MODEL_B "
                                   "[--apply]")
    target = target_from_args(args)
    repository = served_repository(target, "writes its trial copies")
    auth, metrics = guard.os_user(), metrics_url(args, target)
    with client_for(target, args) as client:
        if args.npu is not None:
            models = sorted(set(models) | set(models_on_npu(placement(client, metrics), args.npu)))
        plans = []
        for model in models:
            args.model = model
            plans.append(objective_plan_for(args, target, home))
        with as_interrupts():  # SIGTERM ends it like Ctrl-C: trial copies are removed
            joint = tune_jointly(client, repository, plans, auth=auth, home=home,
                                 budget_s=args.budget_s, metrics_url=metrics, progress=progress,
                                 admin_key=target.spec.admin_key)
        applied = apply_joint(client, repository, joint, auth=auth, home=home) if (
            args.apply and joint.choice.fits) else None
    document = joint.to_json() | ({"applied": applied.describe()} if applied else {})
    print(json.dumps(document, indent=2) if args.json else render_joint(joint))
    if applied is not None and not args.json:
        print(applied.describe())
    elif args.apply and not joint.choice.fits:
        print("nothing applied: no combination meets every objective within the NPU memory")
    if not joint.choice.fits or (applied is not None and not applied.ok):
        return ExitCode.FAILED
    return ExitCode.OK


def _apply(client: TritonClient, repository: Path, args: argparse.Namespace, auth: Authorization,
           home: Path) -> int:
    document = load_run(args.apply_run, home=home)
    if document["model"] != args.model:
        raise TuneRefusedError(f"tuning run {args.apply_run} tuned {document['model']}, not {args.model}")
    result = apply_winner(client, repository, document, auth=auth, home=home)
    print(result.message)
    return ExitCode.OK if result.ok else ExitCode.FAILED


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "tune", help="find the serving config with the batching gain, on trial copies (live untouched)",
        description="Searches max_batch_size (up to what the model loads with, never below an ensemble that "
        "runs it), the preferred batch size, the max queue delay and the instance count on a trial copy "
        "loaded beside the live model, measured with perf_analyzer; the copy is removed whatever happens. "
        "Exit 0 with a winner under the constraints, 1 without one.")
    parser.add_argument("model", nargs="*", default=[], metavar="MODEL",
                        help="the model to tune; with --objective, several: tuned together under the memory "
                        "of the NPUs they share")
    add_connection_args(parser)
    parser.add_argument("--max-p99-ms", type=float, default=None, help="p99 latency limit")
    parser.add_argument("--min-throughput", type=float, default=None, help="inferences per second at least")
    parser.add_argument("--budget-s", type=float, default=180.0, help="time budget in seconds (default 180)")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent requests (default 16)")
    parser.add_argument("--window-ms", type=int, default=1000, help="perf_analyzer's window (default 1000)")
    parser.add_argument("--objective", action="store_true",
                        help="tune to the model's objective (geadmin objectives: p99, error budget) at its "
                        "recorded peak request rate: the fewest instances, then the least NPU memory, that "
                        "meet it")
    parser.add_argument("--since", default="24h", metavar="WHEN",
                        help="--objective: the history window the recorded load is read from, a duration "
                        "(30m, 2h, 7d) or a date / time (default 24h)")
    parser.add_argument("--prometheus-url", default=None, metavar="URL",
                        help="--objective: read the recorded load from this Prometheus (env "
                        "GEADMIN_PROMETHEUS_URL; default: the sampler's history in the workspace)")
    parser.add_argument("--max-instances", type=int, default=3, metavar="N",
                        help="--objective: the most instances tried (default 3)")
    parser.add_argument("--npu", type=int, default=None, metavar="N",
                        help="--objective: tune together every model the model <-> NPU map places on "
                        "device N")
    parser.add_argument("--apply", action="store_true",
                        help="with several models or --npu: apply the joint choice through the safe apply, "
                        "one model at a time, stopping at the first that fails")
    parser.add_argument("--metrics-url", default=None, metavar="URL",
                        help="Triton's metrics page, where npu_ge's device memory is read (default: the "
                        "target's metrics address)")
    parser.add_argument("--list", action="store_true", help="the saved runs")
    parser.add_argument("--show", type=int, default=None, metavar="ID", help="one saved run")
    parser.add_argument("--apply-run", type=int, default=None, metavar="ID",
                        help="apply run ID's winner through the safe apply (validated, rolled back if it "
                        "fails); refused on another server than the run measured, and when the config "
                        "file changed since the run started")
    parser.set_defaults(func=run)
