"""geadmin: control panel for Triton Inference Server on Ascend NPUs.

Floors, bottom first (imports point down; docs/development.md draws them):
- errors/       the one exception tree, a module per family
- binaries.py   where the native programs are (tritonserver, perf_analyzer, streamlit)
- disk.py       a failed file operation's fix from its errno and the free space (a full disk)
- interrupts.py SIGTERM and Ctrl-C end a long CLI run, never dropped in a fork's hook
- failure_table.py  one boundary's failures (output markers, exceptions) -> error class and message
- test_hooks.py the variables only tests set (GEADMIN_FAULT_POINT), kept out of the settings
- domain.py     value types every layer shares
- outside.py    outside answers read with size and depth bounds
- settings.py   every GEADMIN_* setting, typed
- triton/       talking to Triton: client, error translation, known servers, its log
- db.py         the workspace SQLite database: connections, transactions, errors
- migrations.py the workspace database's schema, as its ordered migrations
- audit.py      the audit log
- repository/   model directories on disk: config <-> protobuf, validation, atomic writes
- access/       who may do what: roles, users, sign-in, the one guard
- telemetry/    metrics and NPU sources, history, alerting
- diagnose/     reads only: what is down and why, the verdict, drift, impact of a change
- ops/          changes and exercises a server, audited: model actions, infer, bench, tune
- stack/        running the stack: tritonserver, supervisor, compose, workspace, dashboard
- fleet/        many servers as one: discovery, membership, status, rollouts, versions
- cli/          the `geadmin` command, one module per sub-command
"""

from __future__ import annotations

__version__ = "0.1.0"
