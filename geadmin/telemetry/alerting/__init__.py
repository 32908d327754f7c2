"""What telemetry alerts on: objectives, geadmin's own metrics, and Alertmanager's answer.

- objectives.py    per-model p99 target and error budget, kept in the workspace database
- exporter.py      geadmin's own Prometheus endpoint (probes, states, objectives) for alert rules
- fault_metrics.py NPU faults present now and the instances each model lost, for the exporter
- alertmanager.py  active alerts from Alertmanager's API, for the Overview and `geadmin alerts`
"""
