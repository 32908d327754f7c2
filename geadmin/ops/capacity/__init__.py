"""Capacity from objectives (layer: ops, it loads trial copies and sends load):

- sweep.py   the measured saturation rate at a model's objective, on a trial copy
- saved.py   the last sweep per model and server, kept in the workspace
- tuned.py   the saturation rate the objective tuner measured (its saved run's curve)
- capture.py  a model's request arrivals captured through Triton's trace API, stored for replay
- report.py  capacity_report: the one core function of `geadmin capacity` and the Capacity page
"""
