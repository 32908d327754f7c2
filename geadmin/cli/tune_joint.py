"""`geadmin tune --objective MODEL_A MODEL_B ...` / `geadmin tune --objective --npu N [--apply]`:
the models that share an NPU tuned together under its memory (geadmin.ops.tune.joint_run)."""

from __future__ import annotations

import argparse
import json
import signal
from collections.abc import Callable
from pathlib import Path

from geadmin.access import guard
from geadmin.cli.common import client_for, format_table, target_from_args
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import ConfigError, InvalidArgumentError
from geadmin.ops.tune.joint_run import JointRun, apply_joint, models_on_npu, placement, tune_jointly
from geadmin.ops.tune.memory import MIB
from geadmin.ops.tune.objective import ObjectivePlan
from geadmin.stack.target import Target

PlanFor = Callable[[argparse.Namespace, Target, Path], ObjectivePlan]
MetricsFor = Callable[[argparse.Namespace, Target], str]


def render(joint: JointRun) -> str:
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


def run(args: argparse.Namespace, models: list[str], home: Path, *, plan_for: PlanFor,
        metrics_for: MetricsFor, progress: Callable[[str], None]) -> int:
    if not args.objective or args.list or args.show is not None or args.apply_run is not None:
        raise InvalidArgumentError("several models, or --npu, are tuned together with --objective (no "
                                   "--list, --show or --apply-run): geadmin tune --objective MODEL_A MODEL_B "
                                   "[--apply]")
    target = target_from_args(args)
    if target.repository is None:
        raise ConfigError("the model repository is not known here: pass --repository (the tuner writes its "
                          "trial copies there)")
    auth, metrics_url = guard.os_user(), metrics_for(args, target)
    with client_for(target, args) as client:
        if args.npu is not None:
            models = sorted(set(models) | set(models_on_npu(placement(client, metrics_url), args.npu)))
        plans = []
        for model in models:
            args.model = model
            plans.append(plan_for(args, target, home))
        previous = signal.signal(signal.SIGTERM, _interrupt)  # ends like Ctrl-C: trial copies are removed
        try:
            joint = tune_jointly(client, target.repository, plans, auth=auth, home=home,
                                 budget_s=args.budget_s, metrics_url=metrics_url, progress=progress,
                                 admin_key=target.spec.admin_key)
        finally:
            signal.signal(signal.SIGTERM, previous)
        applied = apply_joint(client, target.repository, joint, auth=auth, home=home) if (
            args.apply and joint.choice.fits) else None
    document = joint.to_json() | ({"applied": applied.describe()} if applied else {})
    print(json.dumps(document, indent=2) if args.json else render(joint))
    if applied is not None and not args.json:
        print(applied.describe())
    elif args.apply and not joint.choice.fits:
        print("nothing applied: no combination meets every objective within the NPU memory")
    if not joint.choice.fits or (applied is not None and not applied.ok):
        return ExitCode.FAILED
    return ExitCode.OK


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
