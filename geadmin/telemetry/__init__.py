"""Metrics and NPU telemetry (layer 2).

- scrape.py      a Prometheus text page (Triton's /metrics, npu-exporter's) into samples
- derive.py      rates and latencies per model version from two scrapes
- bottleneck.py  why a model is slow: queue, NPU compute, host I/O or a saturated NPU
- npu.py         NPU value types and the readers of npu-exporter's and Triton's npu_ge metrics
- npu_smi.py     `npu-smi` text into devices
- npu_sources.py which NPU source this host has (exporter, npu-smi, Triton)
- npu_map.py     which model fills which NPU
- sampler.py     scrape, derive and store every interval; history.py reads the series back
- prometheus.py  the same series from a Prometheus server; reader.py picks the source
"""
