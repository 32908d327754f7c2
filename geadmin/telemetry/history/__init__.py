"""What telemetry keeps: the sampler's windows and states, read back as series.

- sampler.py           scrape, derive and store every interval (one sampler per workspace)
- record.py            the sampler's windows written as rows, downsampled and pruned
- store.py             those rows read back as chart series (gaps drawn as gaps)
- watch.py             model states (and since when) and the synthetic probes' results
- prometheus.py        the same series from a Prometheus server: its targets and its HTTP API
- promql.py            the PromQL for each series, and its answers laid on a chart's grid
- prometheus_fleet.py  a scrape job's servers side by side, joined to their nodes' NPUs
- reader.py            which history the charts read: the workspace database or Prometheus
- faults.py            NPU fault records over time: first and last seen, present or cleared
- fault_impact.py      the NPU faults present now and the instances each model lost (the exporter's)
- traffic.py           the load a model really gets: recorded rate, peak and batch mix
- arrivals.py          captured inter-arrival intervals of a model (for perf_analyzer to replay)
"""
