"""/metrics pages in Triton 2.51's format (same families, labels and types as the reference
pages in tests/unit/assets/telemetry) built with chosen counter values."""

from __future__ import annotations

from dataclasses import dataclass, field

from geadmin.telemetry.sources.scrape import Scrape, parse

REASONS = ("BACKEND", "CANCELED", "OTHER", "REJECTED")


@dataclass
class Counters:
    success: float = 0
    inferences: float = 0
    executions: float = 0
    request_us: float = 0
    queue_us: float = 0
    compute_input_us: float = 0
    compute_infer_us: float = 0
    compute_output_us: float = 0
    failures: dict[str, float] = field(default_factory=dict)
    pending: float = 0


FAMILIES = (
    ("nv_inference_request_success", "success"),
    ("nv_inference_count", "inferences"),
    ("nv_inference_exec_count", "executions"),
    ("nv_inference_request_duration_us", "request_us"),
    ("nv_inference_queue_duration_us", "queue_us"),
    ("nv_inference_compute_input_duration_us", "compute_input_us"),
    ("nv_inference_compute_infer_duration_us", "compute_infer_us"),
    ("nv_inference_compute_output_duration_us", "compute_output_us"),
)


def page(models: dict[str, Counters], *, timestamp_s: float, cpu: float = 0.25) -> Scrape:
    """A /metrics page in Triton 2.51's format with these counter values."""
    lines = ["# TYPE nv_inference_request_failure counter"]
    for name, c in models.items():
        for reason in REASONS:
            lines.append(f'nv_inference_request_failure{{model="{name}",reason="{reason}",version="1"}} '
                         f"{c.failures.get(reason, 0)}")
    for family, attr in FAMILIES:
        lines.append(f"# TYPE {family} counter")
        lines += [f'{family}{{model="{name}",version="1"}} {getattr(c, attr)}' for name, c in models.items()]
    lines.append("# TYPE nv_inference_pending_request_count gauge")
    lines += [f'nv_inference_pending_request_count{{model="{n}",version="1"}} {c.pending}'
              for n, c in models.items()]
    lines += ["# TYPE nv_cpu_utilization gauge", f"nv_cpu_utilization {cpu}",
              "# TYPE nv_cpu_memory_total_bytes gauge", "nv_cpu_memory_total_bytes 8000000000",
              "# TYPE nv_cpu_memory_used_bytes gauge", "nv_cpu_memory_used_bytes 2000000000"]
    return parse("\n".join(lines) + "\n", timestamp_s=timestamp_s)
