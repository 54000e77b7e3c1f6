"""The collect template read from a workflow graph (``read``) and written for the deployment page's form
(``build``). Pure: no database; ``service`` looks the deployment and dataset up and checks who may write."""

from __future__ import annotations

from typing import Any

from lanner.workflows.schemas import (
    DEFAULT_CAP,
    DEFAULT_HIGH,
    DEFAULT_LOW,
    DEFAULT_RATE,
    MAX_CAP,
    SPLITS,
    TEMPLATE_ID,
    BlockError,
    Collect,
    Graph,
    Node,
)

X_STEP = 220  # the SDK's layout: each block 220 right of its input


def _number(node: Node, key: str, default: float, errors: list[BlockError], *, low: float, high: float) -> float:
    raw = node.data.config.get(key, default)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        errors.append(BlockError(node.id, node.data.label, f"{key} must be a number (got '{str(raw)[:40]}')"))
        return default
    if not low <= value <= high:
        errors.append(BlockError(node.id, node.data.label, f"{key} must be between {low:g} and {high:g}"))
        return default
    return value


def _text(node: Node, key: str) -> str:
    value = node.data.config.get(key, "")
    return value.strip() if isinstance(value, str) else ""


def read(graph: Graph) -> tuple[Collect | None, list[BlockError]]:
    """The collect template in ``graph``, if the graph is one: a Deployment block leading (directly, or through
    one confidence Gate) to a Dataset block. Errors name the block at fault; a graph of another shape is no
    template and no error (the workflow is kept, Lanner runs nothing of it)."""
    nodes = {node.id: node for node in graph.nodes}
    errors: list[BlockError] = []
    for edge in graph.edges:
        for end in (edge.source, edge.target):
            if end not in nodes:
                errors.append(BlockError(edge.id, "", f"the edge names block '{end[:40]}', which the graph lacks"))
    outgoing: dict[str, list[str]] = {}
    incoming: dict[str, int] = {}
    for edge in graph.edges:
        if edge.source in nodes and edge.target in nodes:
            outgoing.setdefault(edge.source, []).append(edge.target)
            incoming[edge.target] = incoming.get(edge.target, 0) + 1
    for node_id, count in incoming.items():
        if count > 1:
            node = nodes[node_id]
            errors.append(BlockError(node.id, node.data.label, "each block has at most one input"))
    found: Collect | None = None
    for start in graph.nodes:
        if start.data.type != "Deployment" or found is not None:
            continue
        gate: Node | None = None
        chain = [nodes[t] for t in outgoing.get(start.id, [])]
        if chain and chain[0].data.type == "Gate":
            gate = chain[0]
            chain = [nodes[t] for t in outgoing.get(gate.id, [])]
        target = next((n for n in chain if n.data.type == "Dataset"), None)
        if target is None:
            continue
        found = _collect(start, gate, target, errors)
    if found is None and graph.templateId == TEMPLATE_ID:
        errors.append(BlockError("", "", "the collect template needs a Deployment block connected to a Dataset "
                                         "block (through an optional confidence Gate)"))
    return found, errors


def _collect(start: Node, gate: Node | None, target: Node, errors: list[BlockError]) -> Collect | None:
    deployment, dataset = _text(start, "deployment"), _text(target, "dataset")
    if not deployment:
        errors.append(BlockError(start.id, start.data.label, "name the deployment (its slug)"))
    if not dataset:
        errors.append(BlockError(target.id, target.data.label, "name the dataset that collects the images (its "
                                                               "slug)"))
    low, high = DEFAULT_LOW, DEFAULT_HIGH
    if gate is not None:
        if _text(gate, "kind") not in ("", "condition") or _text(gate, "op") not in ("", "between"):
            errors.append(BlockError(gate.id, gate.data.label, "the collect template's gate is a condition: "
                                                               "confidence between value and upper"))
        low = _number(gate, "value", DEFAULT_LOW, errors, low=0.0, high=1.0)
        high = _number(gate, "upper", DEFAULT_HIGH, errors, low=0.0, high=1.0)
        if low > high:
            errors.append(BlockError(gate.id, gate.data.label, "value (the band's low end) is above upper"))
    rate = _number(target, "rate", DEFAULT_RATE, errors, low=0.0, high=1.0)
    cap = int(_number(target, "dailyCap", DEFAULT_CAP, errors, low=0, high=MAX_CAP))
    empty = _number(target, "includeEmpty", 0, errors, low=0, high=1) >= 0.5
    split = _text(target, "split") or "train"
    if split not in SPLITS:
        errors.append(BlockError(target.id, target.data.label, f"split must be one of {', '.join(SPLITS)}"))
        split = "train"
    if not deployment or not dataset or low > high:
        return None
    return Collect(deployment=deployment, dataset=dataset, low=low, high=high, rate=rate, daily_cap=cap,
                   include_empty=empty, split=split, deployment_block=start.id, dataset_block=target.id)


def build(collect: Collect) -> dict[str, Any]:
    """The graph of the collect template, laid out as the SDK describes (blocks 220 apart)."""
    nodes = [
        {"id": "deployment", "type": "agent", "position": {"x": 0, "y": 0},
         "data": {"label": "Deployment", "type": "Deployment", "config": {"deployment": collect.deployment}}},
        {"id": "uncertain", "type": "agent", "position": {"x": X_STEP, "y": 0},
         "data": {"label": "Uncertain", "type": "Gate", "config": {
             "kind": "condition", "path": "deployment.confidence.*", "op": "between", "value": collect.low,
             "upper": collect.high}}},
        {"id": "collect", "type": "agent", "position": {"x": 2 * X_STEP, "y": 0},
         "data": {"label": "Label queue", "type": "Dataset", "config": {
             "dataset": collect.dataset, "rate": collect.rate, "dailyCap": collect.daily_cap,
             "includeEmpty": 1 if collect.include_empty else 0, "split": collect.split}}},
    ]
    edges = [{"id": "e1", "source": "deployment", "target": "uncertain"},
             {"id": "e2", "source": "uncertain", "target": "collect"}]
    return {"nodes": nodes, "edges": edges, "templateId": TEMPLATE_ID}
