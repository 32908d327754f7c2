"""For capacity tests and the capacity benchmark: a python model with a known service time
(each instance sleeps `service_s` per request, so k instances saturate at k / service_s
requests/s), and a recorded request-rate ramp written into the workspace history the way the
sampler writes it (geadmin.telemetry.history.record.record_window)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from geadmin.telemetry.derive import ModelWindow, ServerStats, Window
from geadmin.telemetry.history import record as history

PACED_EXECUTE = """import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            time.sleep({service_s!r})
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x.astype(np.float32))]))
        return responses
"""


def add_paced_model(repository: Path, name: str, *, service_s: float, instances: int) -> Path:
    """`name`: one FP32 input `x` [1], no batching, `instances` CPU instances, each taking
    `service_s` per request."""
    model = repository / name
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]\n'
        f'instance_group [{{ count: {instances} kind: KIND_CPU }}]\n')
    (model / "1" / "model.py").write_text(PACED_EXECUTE.format(service_s=service_s))
    return model


def model_window(model: str, rate: float, span_s: float) -> ModelWindow:
    return ModelWindow(model, "1", span_s, rate, rate, rate, 0.0, rate, 1.0, None, None, None, None, None, (),
                       (), 0.0, False, False)


def record_ramp(source: str, model: str, rates: Sequence[float], *, end_s: float, step_s: float,
                home: Path) -> None:
    """One sampler window per rate, `step_s` long, the last ending at `end_s`."""
    server = ServerStats(None, None, None, None, None)
    for i, rate in enumerate(rates):
        end = end_s - (len(rates) - 1 - i) * step_s
        history.record_window(Window(end - step_s, end, (model_window(model, rate, step_s),), server), source,
                              home=home)
