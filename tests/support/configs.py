"""Model configs the validator and config-command tests start from."""

from __future__ import annotations

# A valid npu_ge config: the base every validator case changes one thing of.
BASE = """name: "m"
backend: "npu_ge"
max_batch_size: 8
input [{ name: "x", data_type: TYPE_FP32, dims: [4] }]
output [{ name: "y", data_type: TYPE_FP32, dims: [4] }]
instance_group [{ kind: KIND_CPU, count: 1 }]
dynamic_batching { max_queue_delay_microseconds: 2000 }
"""
STEP = BASE.replace('name: "m"', 'name: "step"')
# An ensemble of one step, `step` (STEP's model), IN -> x, y -> OUT.
ENSEMBLE = """name: "m"
platform: "ensemble"
max_batch_size: 8
input [{ name: "IN", data_type: TYPE_FP32, dims: [4] }]
output [{ name: "OUT", data_type: TYPE_FP32, dims: [4] }]
ensemble_scheduling { step [{
  model_name: "step"
  model_version: -1
  input_map { key: "x" value: "IN" }
  output_map { key: "y" value: "OUT" }
}] }
"""
