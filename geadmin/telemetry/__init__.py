"""Metrics and NPU telemetry (layer 2). Empty until the metrics issue lands here."""
