"""Everything that changes or exercises a server, audited and guarded (layer 3), by verb family.

- models/       change a model: load/unload/reload checked afterwards, config apply with rollback,
                new models from templates, changes cut short found at the next start
- infer/        test inference: one request built from the model's metadata, and what came back
- bench/        load tests with perf_analyzer: run, parse, keep, compare
- npu/          NPU faults: the sampler's fault watcher, and a chip's remedy plan applied (dry run first)
- tune/         the tuner: search space, trial copies, memory check, results, applying a winner
- capacity/     capacity from objectives: the measured saturation sweep, saved sweeps, the report
- bundle.py     the diagnostics bundle an operator attaches to a ticket
- monitoring.py a model's objectives and probe example, guarded and audited
- probe.py      synthetic probes: a small real request to every READY model
- runs.py       the one registry of background runs a page starts and watches (load tests, rollouts)
"""
