"""What telemetry reads: Prometheus text pages and Ascend NPUs from three sources.

- scrape.py     a Prometheus text page (Triton's /metrics, npu-exporter's) into frozen samples
- npu.py        NPU value types and the readers of npu-exporter's and npu_ge's metrics
- npu_smi.py    running `npu-smi`, and any npu-smi text into devices
- npu_smi_table.py    the `npu-smi info` table and `info watch` output into devices
- npu_smi_details.py  `npu-smi info -t ...` key/value blocks into device fields
- npu_smi_values.py   npu-smi words as numbers and text (NA, -- are unknown)
- detect.py     which NPU source this host has: npu-exporter, then npu-smi, then npu_ge
- npu_faults.py  the driver's fault codes per chip, parsed from each source's page or text
- fault_reading.py  every fault source available, read now into one reading with its notes
- npu_smi_health.py  `npu-smi` chip health: the info table's Health column and `-t health` codes
- triton_trace.py  a model's request arrivals from Triton's trace files (TIMESTAMPS level)
- fault_table.py  fault code -> level -> meaning for inference -> action (Huawei's tables as data)

Package data: npu_fault_table.json, the built-in fault table fault_table.py reads.
"""
