"""The `geadmin` command line: `main.py` routes to one module per sub-command.

- main.py            the router
- __main__.py        `python -m geadmin.cli`
- common.py          options and helpers shared by the sub-commands (no command imports a sibling)
- exit_codes.py      the one exit-code table every command returns from
- status.py          `geadmin status`: OK, DEGRADED or DOWN for scripts and on-call pages
- models.py          `geadmin models list|load|unload|reload|create`
- config.py          `geadmin config`: validate, apply, history, rollback (one plan, as the editor)
- audit_log.py       `geadmin audit`: who changed what
- infer.py           `geadmin infer MODEL`: one test request
- bench.py           `geadmin bench MODEL`: a perf_analyzer load test
- tune.py            `geadmin tune MODEL`: search a model's serving config
- capacity.py        `geadmin capacity [MODEL]`: headroom at the objective, trend, forecast, needs
- traffic.py         `geadmin traffic capture MODEL`: record real request arrivals for tuning to replay
- top.py             `geadmin top`: what Triton is doing now, per model
- npu.py             `geadmin npu`: this host's Ascend NPUs
- npu_faults.py      `geadmin npu faults`: NPU faults, the models they hit, the next safe step
- npu_remedy.py      `geadmin npu remedy`: a faulted chip's plan, dry run by default (--apply)
- sampler.py         `geadmin sampler`: record telemetry into the workspace history
- probe.py           `geadmin probe`: a small real request to every READY model
- objectives.py      `geadmin objectives`: per-model p99 target and error budget
- alerts.py          `geadmin alerts`: Alertmanager's active alerts
- bundle.py          `geadmin bundle`: the diagnostics bundle
- fleet.py           `geadmin fleet`: many servers as one
- up.py              `geadmin up`: the embedded stack
- stack.py           `geadmin stack`: the stack's services; restart, stop or start one
- dashboard.py       `geadmin dashboard`: the dashboard alone
- users.py           `geadmin users`: the dashboard's local users
"""
