"""Test inference: one request to any model, built from its metadata, sent, and timed.

`prepare` reads what the model accepts (`geadmin.ops.infer.spec`), `build_request` makes
the tensors from the chosen sources (`geadmin.ops.infer.inputs`) and checks them before
anything is sent, `send` runs it over the client's transport (HTTP or gRPC) and returns a
frozen `InferResult`: the outputs, the end-to-end latency and Triton's own breakdown for
the request (queue, compute input / infer / output) from model-statistics deltas taken
before and after. `smoke_request` checks that a model answers at all (after a config
apply). Its outputs, read (plain values, class scores with labels):
`geadmin.ops.infer.outputs`. The same request as curl or Python: `geadmin.ops.infer.snippets`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tritonclient.grpc.model_config_pb2 import ModelConfig

from geadmin.domain import format_duration
from geadmin.errors import (
    ForbiddenError,
    GeAdminError,
    InferInputError,
    InputTooLargeError,
    TritonError,
    TritonTimeoutError,
)
from geadmin.ops.infer.inputs import DEFAULT_SEED, RANDOM, ZEROS, InputSource, build_inputs
from geadmin.ops.infer.spec import MAX_UPLOAD_BYTES, ModelSpec, model_spec
from geadmin.triton.client import Tensor, TritonClient

STATS_SETTLE_S = 1.0  # Triton counts a request when it is released, just after the response
STATS_POLL_S = 0.02
STAGES = ("queue", "compute_input", "compute_infer", "compute_output")
NOT_SCORES = ("BYTES", "BOOL")  # outputs that cannot be ranked


@dataclass(frozen=True)
class InferRequest:
    model: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[str, ...] = ()  # empty: every output
    class_count: int = 0  # > 0: Triton's classification extension, top classes per output
    version: str = ""
    output_order: tuple[str, ...] = ()  # the model's outputs in its config's order (send keeps it)

    def input(self, name: str) -> Tensor:
        return next(t for t in self.inputs if t.name == name)


@dataclass(frozen=True)
class ServerBreakdown:
    """Triton's time for the request, per stage, from statistics deltas (microseconds).

    When other requests ran between the two reads, the delta holds them too: the values
    are then the average of `requests` requests and `approximate` is set. Under load even
    `requests == 1` is not proof that the one counted is ours; on a quiet server it is."""

    queue_us: float
    compute_input_us: float
    compute_infer_us: float
    compute_output_us: float
    requests: int  # successful requests in the delta (1 when only ours ran)
    approximate: bool
    note: str = ""

    @property
    def total_us(self) -> float:
        return self.queue_us + self.compute_input_us + self.compute_infer_us + self.compute_output_us


@dataclass(frozen=True)
class InferResult:
    model: str
    version: str
    protocol: str  # "http" or "grpc"
    outputs: tuple[Tensor, ...]
    latency_ms: float  # end to end, as the client saw it
    server: ServerBreakdown | None  # None when the statistics could not be read
    server_note: str = ""  # why `server` is missing or approximate

    def output(self, name: str) -> Tensor:
        for tensor in self.outputs:
            if tensor.name == name:
                return tensor
        raise InferInputError(f"the response has no output {name!r}")


@dataclass(frozen=True)
class SmokeResult:
    model: str
    ok: bool
    reason: str = ""  # why it failed; empty when ok
    latency_ms: float | None = None
    timed_out: bool = False  # no answer within the client's timeout: the request may still run in Triton


CONFIG_FORBIDDEN_NOTE = ("this server's model-config API needs an admin key that geadmin is not given, so "
                         "the request is built from the model's metadata alone: one row, no labels, no "
                         "image format (give the server's key: admin_key in the servers file, or "
                         "--admin-key)")


# -- building ------------------------------------------------------------------------------
def prepare(client: TritonClient, model: str, version: str = "") -> ModelSpec:
    """What `model` accepts, from Triton's metadata and normalized config. A server whose
    model-config API needs a key geadmin does not hold (metadata and inference are open) still
    gets a request: from the metadata alone, one row, every dynamic dim 1, and a note saying so."""
    metadata = client.model_metadata(model, version)
    try:
        config = client.model_config(model, version)
    except ForbiddenError:
        return replace(model_spec(model, metadata, ModelConfig()), note=CONFIG_FORBIDDEN_NOTE)
    return model_spec(model, metadata, config)


def build_request(
    spec: ModelSpec,
    sources: Mapping[str, InputSource] | None = None,
    *,
    shapes: Mapping[str, Sequence[int]] | None = None,
    batch_size: int = 1,
    seed: int = DEFAULT_SEED,
    outputs: Sequence[str] = (),
    class_count: int = 0,
    default: InputSource = RANDOM,
    version: str = "",
) -> InferRequest:
    """Checked tensors for every input (`default` for inputs no source names)."""
    for name in outputs:
        spec.output(name)
    if class_count < 0:
        raise InferInputError(f"class count must be 0 or more, got {class_count}")
    tensors = build_inputs(spec, sources or {}, shapes=shapes, batch_size=batch_size, seed=seed,
                           default=default)
    by_name = {s.name: s for s in spec.inputs}
    if class_count and not outputs:  # the classification extension applies to named outputs only
        outputs = [o.name for o in spec.outputs if o.datatype not in NOT_SCORES]
    return InferRequest(
        spec.name,
        tuple(Tensor(name, by_name[name].datatype, data) for name, data in tensors.items()),
        tuple(outputs), class_count, version, tuple(o.name for o in spec.outputs),
    )


# -- sending -------------------------------------------------------------------------------
def send(client: TritonClient, request: InferRequest, *, statistics: bool = True) -> InferResult:
    """Run `request`; with `statistics`, read the model's statistics before and after."""
    before = _stage_totals(client, request) if statistics else None
    started = time.perf_counter()
    try:
        response = client.infer(request.model, request.inputs, outputs=request.outputs,
                                class_count=request.class_count, version=request.version)
    except TritonTimeoutError as exc:  # the request goes on in Triton: say what that means
        raise TritonTimeoutError(
            f"infer with {request.model!r}: no answer from Triton at {exc.url or client.url} within "
            f"{format_duration(client.timeout_s)} — the model is slower than that (a longer timeout: "
            "`geadmin infer --timeout S`) or hung in its execute, where every request waits (reload it: "
            f"`geadmin models reload {request.model}`)", url=exc.url) from exc
    latency_ms = (time.perf_counter() - started) * 1000.0
    server, note = None, "statistics not read"
    if statistics:
        server, note = _breakdown(client, request, before)
    return InferResult(request.model, response.model_version, client.transport.value,
                       in_model_order(response.outputs, request.output_order), latency_ms, server, note)


def in_model_order(outputs: Sequence[Tensor], order: Sequence[str]) -> tuple[Tensor, ...]:
    """The response's outputs in the model's order (Triton answers in its own); names the order
    does not know go last, as they came."""
    rank = {name: i for i, name in enumerate(order)}
    return tuple(sorted(outputs, key=lambda t: rank.get(t.name, len(rank))))


def _stage_totals(client: TritonClient, request: InferRequest) -> dict[str, int] | None:
    """{"success": count, "queue": ns, ...} summed over the versions Triton reports."""
    try:
        stats = client.model_statistics(request.model, request.version)
    except TritonError:
        return None
    totals = dict.fromkeys(("success", *STAGES), 0)
    for version in stats:
        inference = version.inference_stats
        totals["success"] += int(inference.success.count)
        for stage in STAGES:
            totals[stage] += int(getattr(inference, stage).ns)
    return totals


def _breakdown(client: TritonClient, request: InferRequest,
               before: dict[str, int] | None) -> tuple[ServerBreakdown | None, str]:
    if before is None:
        return None, "Triton's statistics could not be read"
    deadline = time.monotonic() + STATS_SETTLE_S
    after = _stage_totals(client, request)
    while after is not None and after["success"] <= before["success"] and time.monotonic() < deadline:
        time.sleep(STATS_POLL_S)
        after = _stage_totals(client, request)
    if after is None:
        return None, "Triton's statistics could not be read"
    count = after["success"] - before["success"]
    if count <= 0:
        return None, "Triton's statistics did not count the request (was the model reloaded?)"
    per = {stage: (after[stage] - before[stage]) / count / 1000.0 for stage in STAGES}
    note = "" if count == 1 else (f"{count} requests finished between the two statistics reads: "
                                  "the stages are their average, not this request's alone")
    return ServerBreakdown(per["queue"], per["compute_input"], per["compute_infer"], per["compute_output"],
                           count, count != 1, note), note


def infer(client: TritonClient, model: str, sources: Mapping[str, InputSource] | None = None,
          **options: Any) -> InferResult:
    """`prepare`, `build_request` (with `options`) and `send` in one call."""
    return send(client, build_request(prepare(client, model), sources, **options))


def input_fix(error: InferInputError) -> str:
    """The next step for an input that was refused before sending."""
    if isinstance(error, InputTooLargeError):
        return (f"use a smaller file (the limit is {MAX_UPLOAD_BYTES / 1e6:.1f} MB) or a smaller shape "
                "or batch size")
    return ("give data of the dtype and shape the input expects (shown beside it), or pick a generated "
            "source (random, zeros, ones) that always fits")


# -- smoke ---------------------------------------------------------------------------------
def smoke_request(client: TritonClient, model: str, version: str = "",
                  sources: Mapping[str, InputSource] | None = None) -> SmokeResult:
    """One request — `sources` where given (a saved example), else zeros for every input,
    shaped from the metadata: does `model` answer?"""
    try:
        spec = prepare(client, model, version)
        request = build_request(spec, sources, default=ZEROS, version=version)
        result = send(client, request, statistics=False)
    except GeAdminError as exc:
        return SmokeResult(model, False, str(exc), timed_out=isinstance(exc, TritonTimeoutError))
    missing = {o.name for o in spec.outputs} - {t.name for t in result.outputs}
    if missing:
        return SmokeResult(model, False, f"the response lacks outputs {sorted(missing)}", result.latency_ms)
    return SmokeResult(model, True, "", result.latency_ms)
