"""Metrics and NPU telemetry (layer 2): where figures come from, how they are kept, what alerts.

- sources/       what is read: Prometheus text pages, NPUs from npu-exporter, npu-smi or npu_ge
- history/       what is kept: the sampler, its SQLite history, Prometheus as a history source
- alerting/      what alerts: objectives, geadmin's own metrics, Alertmanager's active alerts
- derive.py      rates and latencies per model version from two scrapes
- bottleneck.py  why a model is slow: queue, NPU compute, host I/O or a saturated NPU
- npu_map.py     which model fills which NPU
"""
