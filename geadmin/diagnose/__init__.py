"""What is down and why (layer 2, reads only: nothing here writes or loads).

- health.py        server snapshots and the models sorted for an on-call operator
- verdict.py       the verdict's rules on values: OK / DEGRADED / DOWN, and the reasons why
- evidence.py      what the verdict reads (Triton, its log, the workspace, /metrics), and `assess`
- stuck.py         models stuck LOADING / UNLOADING, and since when (Triton's log)
- explain.py       why a load failed: the real reason, not "failed to poll from model repository"
- failure_text.py  a failure split for a tired reader: cause, fix, what still serves
- advice.py        which finding leads, and the fix that goes with it
- rows.py          the Models table: one row per model
- details.py       one model in detail: inputs, outputs, statistics, config
- drift.py         a model whose config on disk is not the config Triton serves
- impact.py        what a change would do to the loaded ensembles that run a model, before it
- state_changes.py  the other models a change moved, found after it, with Triton's reason
- ensemble.py      an ensemble's steps and tensors as a graph
- unloads.py       who took a model out of service (an unload is a choice, not a failure)
- probe_check.py   whether a recent synthetic probe checked that the READY models answer
- interrupted.py   changes cut short that still wait for an operator, from the audit log
- rollouts.py      fleet rollouts as their journal tells them
- rollout_plan.py  a fleet rollout's plan as journaled: servers, configs before, a version's next step
- own_work.py      geadmin's own work on a server (the tuner's trials), kept out of the verdict
- npu_ge_instances.py  npu_ge instances that can never execute again, from Triton's /metrics
- npu_faults.py    which models an NPU fault hits, the capacity it took, and the plan
- fault_plan.py    the next safe steps for one NPU fault, per level (a dry run)
- fault_report.py  gathers one server's fault records, NPUs, model map and ensembles for the report
- fault_text.py    an NPU fault report in words and as JSON, alike everywhere
- fault_rule.py    the verdict's npu-fault rule: recorded faults that need action, models left DOWN
- forecast.py      the trend of a recorded rate (least squares) and when it would saturate
- capacity.py      per model: saturation rate, recorded peak, headroom, forecast, needs; per NPU: HBM
"""
