"""A response's outputs, read: plain values for JSON and tables, the best classes with labels.

`tensor_record` and `tensor_rows` turn an output of an `InferResult`
(geadmin.ops.infer.request) into JSON-ready values and table rows (BYTES as text, or base64
when not UTF-8). `top_k` ranks class scores with the labels of the output's `label_filename`
(`read_labels`, from the model's directory); `parse_classification` reads the classes Triton's
classification extension ranked itself. `top_k_plan` chooses between the two before the request
is sent, and `rank_outputs` applies the plan to a result.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from geadmin.errors import InferInputError, RepositoryError
from geadmin.ops.infer.request import NOT_SCORES, InferResult
from geadmin.ops.infer.spec import MAX_UPLOAD_BYTES, ModelSpec, OutputSpec
from geadmin.repository.bounded import read_bounded
from geadmin.repository.layout import model_dir
from geadmin.repository.triton_rules import label_path
from geadmin.triton.client import Tensor


@dataclass(frozen=True)
class ClassScore:
    index: int
    score: float
    label: str = ""


@dataclass(frozen=True)
class TopKPlan:
    """How to rank the outputs: `k` best classes, labels read from the repository per output,
    or (`class_count` > 0) Triton's classification extension, which reads them itself."""

    k: int = 0
    labels: dict[str, list[str]] = field(default_factory=dict)
    class_count: int = 0


def tensor_record(tensor: Tensor) -> dict[str, Any]:
    """JSON-ready: BYTES as text when UTF-8, else {"base64": ...} per element."""
    return {"name": tensor.name, "datatype": tensor.datatype, "shape": list(tensor.shape),
            "data": plain_values(tensor.data)}


def plain_values(data: np.ndarray) -> list[Any]:
    if data.dtype == np.object_:
        return [plain_bytes(v) for v in data.flat]
    return [v.item() for v in data.flat]


def plain_bytes(value: Any) -> Any:
    if not isinstance(value, bytes):
        return str(value)
    try:
        return value.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(value).decode()}


def top_k(tensor: Tensor, k: int, labels: Sequence[str] = ()) -> list[list[ClassScore]]:
    """The k best classes per batch item (one row when unbatched), best first."""
    if tensor.data.dtype == np.object_ or tensor.datatype in NOT_SCORES:
        raise InferInputError(f"output {tensor.name} is {tensor.datatype}: top-k needs scores")
    rows = _rows(tensor)
    ranked = []
    for row in rows.astype(np.float64):
        order = np.argsort(-row, kind="stable")[:max(k, 0)]
        ranked.append([ClassScore(int(i), float(row[i]), labels[i] if i < len(labels) else "")
                       for i in order])
    return ranked


def parse_classification(tensor: Tensor) -> list[list[ClassScore]]:
    """What Triton's classification extension returns: "score:index[:label]" per class."""
    if tensor.data.dtype != np.object_:
        raise InferInputError(f"output {tensor.name} is not a classification (BYTES) output")
    parsed = []
    for row in _rows(tensor):
        entries = []
        for item in row:
            text = item.decode(errors="replace") if isinstance(item, bytes) else str(item)
            score, _, rest = text.partition(":")
            index, _, label = rest.partition(":")
            try:
                entries.append(ClassScore(int(index), float(score), label))
            except ValueError as exc:
                raise InferInputError(f"output {tensor.name}: {text!r} is not Triton's "
                                      "\"score:index[:label]\" classification") from exc
        parsed.append(entries)
    return parsed


def _rows(tensor: Tensor) -> np.ndarray:
    """One row per batch item (one row in all when the output has at most one dimension)."""
    data = tensor.data
    if data.ndim <= 1:
        return data.reshape(1, -1)
    return data.reshape(data.shape[0], int(np.prod(data.shape[1:])))


def read_labels(repository: Path, model: str, output: OutputSpec) -> list[str]:
    """The labels file an output's `label_filename` names, from the model's directory; []
    when it names none. Read through read_bounded: a regular file of at most MAX_UPLOAD_BYTES
    (a FIFO there had hung the reader)."""
    if not output.label_filename:
        return []
    try:
        path = label_path(model_dir(repository, model), output.label_filename)
    except RepositoryError as exc:
        raise RepositoryError(f"labels of output {output.name} of {model}: {exc}") from exc
    try:
        data = read_bounded(path, MAX_UPLOAD_BYTES, what=f"label_filename {output.label_filename!r}",
                            fix="make it a text file of one label per line")
        return data.decode("utf-8").splitlines()
    except RepositoryError as exc:
        raise RepositoryError(f"cannot read the labels of output {output.name}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise RepositoryError(f"cannot read the labels of output {output.name}: {path} is not UTF-8 text "
                              f"({exc}): save it as UTF-8") from exc


def top_k_plan(spec: ModelSpec, k: int, outputs: Sequence[str] = (),
               repository: Path | None = None) -> TopKPlan:
    """Labels from the repository when it is at hand, else Triton's classification extension
    when a ranked output has a labels file only Triton can read."""
    if k < 0:
        raise InferInputError(f"top-k must be 1 or more, got {k}")
    if not k:
        return TopKPlan()
    wanted = [spec.output(n) for n in outputs] if outputs else list(spec.outputs)
    labelled = [o for o in wanted if o.label_filename]
    if labelled and repository is None:
        return TopKPlan(k, {}, k)
    return TopKPlan(k, {o.name: read_labels(repository, spec.name, o) for o in labelled if repository})


def rank_outputs(result: InferResult, plan: TopKPlan) -> dict[str, list[list[ClassScore]]]:
    """{output: the best classes per batch item} for every output that can be ranked."""
    if not plan.k:
        return {}
    if plan.class_count:
        return {t.name: parse_classification(t) for t in result.outputs if t.datatype == "BYTES"}
    return {t.name: top_k(t, plan.k, plan.labels.get(t.name, ()))
            for t in result.outputs if t.datatype not in NOT_SCORES}


def tensor_rows(tensor: Tensor) -> list[list[Any]]:
    """One row per batch item (one in all for at most one dimension), plain values: a table."""
    rows = _rows(tensor) if tensor.data.size else np.empty((0, 0), dtype=tensor.data.dtype)
    return [plain_values(row) for row in rows]
