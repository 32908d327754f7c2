"""Ensembles: which step feeds which tensor to which step, drawn as a Graphviz graph."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tritonclient.grpc import model_config_pb2

ENSEMBLE = "ensemble"


@dataclass(frozen=True)
class GraphEdge:
    source: str  # node id: "in:<tensor>", "step<i>", "out:<tensor>"
    target: str
    tensor: str


@dataclass(frozen=True)
class EnsembleGraph:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    steps: tuple[str, ...]  # model names, in config order; node id "step<i>"
    edges: tuple[GraphEdge, ...] = field(default_factory=tuple)


def ensemble_graph(config: model_config_pb2.ModelConfig) -> EnsembleGraph:
    """Which step feeds which tensor to which step, from `ensemble_scheduling`."""
    inputs = tuple(t.name for t in config.input)
    outputs = tuple(t.name for t in config.output)
    producer = {tensor: f"in:{tensor}" for tensor in inputs}
    steps = config.ensemble_scheduling.step
    for i, step in enumerate(steps):
        for tensor in step.output_map.values():
            producer[tensor] = f"step{i}"
    edges = []
    for i, step in enumerate(steps):
        for tensor in sorted(step.input_map.values()):
            edges.append(GraphEdge(producer.get(tensor, f"in:{tensor}"), f"step{i}", tensor))
    edges += [GraphEdge(producer.get(tensor, f"in:{tensor}"), f"out:{tensor}", tensor) for tensor in outputs]
    return EnsembleGraph(config.name, inputs, outputs, tuple(s.model_name for s in steps), tuple(edges))


def composing_models(config: model_config_pb2.ModelConfig) -> list[str]:
    return sorted({step.model_name for step in config.ensemble_scheduling.step})


def graph_dot(graph: EnsembleGraph) -> str:
    """Graphviz DOT source (st.graphviz_chart renders it in the browser)."""
    q = json.dumps
    lines = [f"digraph {q(graph.name)} {{", "  rankdir=LR;", '  node [fontname="Helvetica"];']
    lines += [f"  {q('in:' + t)} [label={q(t)}, shape=oval];" for t in graph.inputs]
    lines += [f"  {q(f'step{i}')} [label={q(m)}, shape=box, style=rounded];"
              for i, m in enumerate(graph.steps)]
    lines += [f"  {q('out:' + t)} [label={q(t)}, shape=oval];" for t in graph.outputs]
    lines += [f"  {q(e.source)} -> {q(e.target)} [label={q(e.tensor)}];" for e in graph.edges]
    return "\n".join([*lines, "}"])


