"""NPU faults, acted on: recorded continuously, and a faulted chip's plan applied (dry run first).

- watch.py    the sampler's fault watcher: the faults present now and what each model lost, per read
- remedy.py   apply_plan: a chip's plan step by step, guarded and audited with the fault named
- devices.py  a config drained of a chip (device_ids without it), and the memory check of a move
- wiring.py   the one place these call the fault readers, history and impact of the other modules
"""
