"""The SDK's workflow document (``agents.save``'s body) and the one runnable template Lanner reads from it.

A graph is ``{nodes: [{id, type: "agent", position: {x, y}, data: {label, type, config}}], edges: [{id, source,
target}], templateId}``. The body is checked for shape only (a 422 names the field); what the blocks mean is
answered as block errors (``{id, label, message}``), and the workflow is saved either way, as the hosted
platform does.

**Collect uncertain detections** (``TEMPLATE_ID``, or any graph of this shape): a ``Deployment`` block
``{deployment: slug}`` whose edge leads to a ``Dataset`` block ``{dataset: slug}`` (given an input, a Dataset
block collects), optionally through a ``Gate`` ``{kind: "condition", path: "<deployment block>.confidence.*",
op: "between", value: low, upper: high}``. Lanner's extra config keys, on the Dataset block: ``rate`` (0-1, the
share of uncertain predictions kept), ``dailyCap`` (images a day), ``includeEmpty`` (1: an answer with no
detection is uncertain too), ``split``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from lanner.bounds import INT32_MAX

TEMPLATE_ID = "collect-uncertain"
BLOCK_TYPES = ("Dataset", "Image", "YOLO", "LLM", "Gate", "Export", "Deployment", "Output", "Slack", "Webhook")
MAX_NODES = 200
DEFAULT_LOW, DEFAULT_HIGH = 0.25, 0.6
DEFAULT_RATE, DEFAULT_CAP = 0.1, 100
MAX_CAP = 100_000
SPLITS = ("train", "val", "test")

Text = Annotated[str, Field(max_length=200)]
ConfigValue = Annotated[str, Field(max_length=2000)] | float


class Position(BaseModel):
    x: float = Field(allow_inf_nan=False)
    y: float = Field(allow_inf_nan=False)


class NodeData(BaseModel):
    label: Text = ""
    type: Literal[BLOCK_TYPES]  # type: ignore[valid-type]
    config: dict[Annotated[str, Field(max_length=100)], ConfigValue] = Field(default_factory=dict, max_length=50)


class Node(BaseModel):
    id: Text
    type: Literal["agent"] = "agent"
    position: Position = Field(default_factory=lambda: Position(x=0, y=0))
    data: NodeData


class Edge(BaseModel):
    id: Text
    source: Text
    target: Text


class Graph(BaseModel):
    model_config = ConfigDict(extra="ignore")

    nodes: list[Node] = Field(default_factory=list, max_length=MAX_NODES)
    edges: list[Edge] = Field(default_factory=list, max_length=MAX_NODES)
    templateId: Text = ""  # noqa: N815  (the SDK's name)


class WorkflowSave(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: Annotated[str, Field(max_length=32)] | None = None
    name: Annotated[str, Field(min_length=1, max_length=200)]
    graph: Graph
    version: int = Field(ge=0, le=INT32_MAX, description="The version being replaced; 0 creates the workflow")


@dataclass(frozen=True)
class Collect:
    """What the collect template says, before its deployment and dataset are looked up."""

    deployment: str
    dataset: str
    low: float = DEFAULT_LOW
    high: float = DEFAULT_HIGH
    rate: float = DEFAULT_RATE
    daily_cap: int = DEFAULT_CAP
    include_empty: bool = False
    split: str = "train"
    deployment_block: str = ""
    dataset_block: str = ""


@dataclass(frozen=True)
class BlockError:
    id: str
    label: str
    message: str

    def json(self) -> dict[str, str]:
        return {"id": self.id, "label": self.label, "message": self.message}
