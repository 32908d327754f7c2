"""The tensors of an inference request and response, and their translation to and from
tritonclient's HTTP and gRPC objects (split from client.py, which talks to Triton)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tritonclient.http as httpclient

from geadmin.errors import TritonRequestError


@dataclass(frozen=True, eq=False)
class Tensor:
    """A named tensor of one request or response; `data.shape` is its shape."""

    name: str
    datatype: str  # Triton's name: FP32, BYTES, BF16 (held as float32), ...
    data: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.data.shape)


def _infer_inputs(module: Any, tensors: Sequence[Tensor]) -> list[Any]:
    made = []
    for tensor in tensors:
        item = module.InferInput(tensor.name, list(tensor.shape), tensor.datatype)
        if module is httpclient:
            item.set_data_from_numpy(tensor.data, binary_data=True)
        else:
            item.set_data_from_numpy(tensor.data)
        made.append(item)
    return made


def _requested_outputs(module: Any, names: Sequence[str], class_count: int) -> list[Any] | None:
    if not names:
        return None
    if module is httpclient:
        return [module.InferRequestedOutput(n, binary_data=True, class_count=class_count) for n in names]
    return [module.InferRequestedOutput(n, class_count=class_count) for n in names]


@dataclass(frozen=True)
class InferResponse:
    model_version: str
    outputs: tuple[Tensor, ...]


def _response(result: Any) -> InferResponse:
    response = result.get_response()
    if isinstance(response, dict):  # HTTP
        version = str(response.get("model_version", ""))
        described = [(o["name"], o["datatype"]) for o in response.get("outputs", [])]
    else:
        version = response.model_version
        described = [(o.name, o.datatype) for o in response.outputs]
    tensors = []
    for name, datatype in described:
        data = result.as_numpy(name)
        if data is None:
            raise TritonRequestError(f"the response has no data for output {name!r}")
        data.setflags(write=False)  # a response is a record: nobody edits it in place
        tensors.append(Tensor(name, datatype, data))
    return InferResponse(version, tuple(tensors))
