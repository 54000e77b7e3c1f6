"""GPU catalogue: every type ``training.start`` accepts, plus ``cpu``, with specs, prices and tier limits.

The defaults ship as ``catalogue.csv`` (hosted list prices and datasheet specs, each row with its source).
A self-hosted team rarely pays hosted prices, so ``LANNER_GPU_CATALOGUE`` lets the operator re-price types,
restrict them to a tier, choose which are offered and add their own (see ``apply_overrides`` for the format).

Each type also says what host comes with it (``host_vcpus``, ``host_ram_gb``): the data loader runs on those
vCPUs, so they bound how fast a fast GPU can be fed. The reference (shared/reference/gpus.csv, hosted-platform.md)
does not state the hosted provider's host per GPU, so the defaults follow one rule (``host_rule``), and an
operator who knows their hosts sets them in ``LANNER_GPU_CATALOGUE``.

A run may use several GPUs of one type on one node (DDP); ``multi_gpu_efficiency`` says how much of each extra GPU
it gets (``MULTI_GPU_EFFICIENCY`` has the defaults and why). The host scales with the GPUs: each brings its slice.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from lanner.gpus import measured as measured_files
from lanner.gpus.measured import MeasuredSet

TIERS: tuple[str, ...] = ("free", "pro", "enterprise")
"""Account tiers, lowest first; the same names as ``lanner.accounts.service.TIERS`` (a test checks it)."""

SETTING = "LANNER_GPU_CATALOGUE"
_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_NUMBER_FIELDS = ("vram_gb", "bandwidth_gbs", "fp32_tflops", "fp16_tflops", "tdp_w", "price_per_hour", "host_ram_gb")
_NULLABLE_FIELDS = ("bandwidth_gbs", "fp32_tflops", "fp16_tflops", "tdp_w")
_TEXT_FIELDS = ("display_name", "architecture", "source")
_NEW_TYPE_REQUIRED = ("display_name", "architecture", "vram_gb", "price_per_hour")

MULTI_GPU_EFFICIENCY = {"nvlink": 0.85, "pcie": 0.80}
"""Per-GPU scaling efficiency of DDP on one node: n GPUs train ``n * efficiency`` times as fast as one. NVLink
(the SXM and NVL types): 0.85, from the one published YOLO measurement, YOLOv5l on 1-8 A100 SXM4
(shared/reference/measured-training.md, A2: 95 -> 84 / 83 / 78 img/s per GPU at 2 / 4 / 8 GPUs, so
0.88 / 0.87 / 0.82). PCIe (every other type): 0.80, an assumption until measured: the gradient all-reduce crosses
PCIe, through host memory on cards without peer-to-peer. A2 kept 16 images per GPU; splitting a fixed batch
leaves each GPU fewer, so for small batches these are optimistic. The estimate says so where it uses them."""


@dataclass(frozen=True)
class GpuType:
    """One trainable device type. ``vram_gb == 0`` means it trains in host RAM (``cpu``)."""

    id: str
    display_name: str
    architecture: str
    vram_gb: float
    bandwidth_gbs: float | None
    fp32_tflops: float | None
    fp16_tflops: float | None  # dense FP16/BF16 tensor throughput, FP32 accumulate where the datasheet says
    price_per_hour: float  # USD; 0.0 on reference-only rows that have no list price (they cannot be offered)
    min_tier: str
    offered: bool
    source: str
    tdp_w: float | None = None
    host_vcpus: int = 8         # vCPUs the host gives with one GPU of this type (the data loader's cores)
    host_ram_gb: float = 32.0   # host RAM with one GPU of this type (GB)
    # DDP's per-GPU scaling efficiency on one node (MULTI_GPU_EFFICIENCY); None: one device per run (cpu)
    multi_gpu_efficiency: float | None = MULTI_GPU_EFFICIENCY["pcie"]

    def allowed_for(self, tier: str) -> bool:
        """Whether an account on ``tier`` may train on this type (offered, and tier at or above ``min_tier``)."""
        return self.offered and _tier_rank(tier) >= _tier_rank(self.min_tier)


class UnknownGpuType(KeyError):
    """A ``KeyError`` whose message reads well in an API error (plain ``KeyError`` quotes it)."""

    def __init__(self, gpu_id: str, known: list[str]) -> None:
        super().__init__(gpu_id)
        self.gpu_id = gpu_id
        self.message = f"unknown GPU type '{gpu_id}': choose one of {', '.join(known)}"

    def __str__(self) -> str:
        return self.message


class Catalogue:
    """Immutable, ordered view of the GPU types (cheapest first, as the CSV lists them)."""

    __slots__ = ("_measured", "_types")

    def __init__(self, types: list[GpuType] | tuple[GpuType, ...], measured: tuple[MeasuredSet, ...] = ()) -> None:
        by_id: dict[str, GpuType] = {}
        for gpu in types:
            if gpu.id in by_id:
                raise ValueError(f"duplicate GPU type '{gpu.id}'")
            by_id[gpu.id] = gpu
        self._types: Mapping[str, GpuType] = MappingProxyType(by_id)
        self._measured = measured

    def measured(self, gpu_id: str) -> tuple[MeasuredSet, ...]:
        """Calibration files (``benchmarks/gpu_calibrate.py``) measured on this GPU type."""
        return tuple(m for m in self._measured if m.gpu_type == gpu_id)

    def get(self, gpu_id: str) -> GpuType:
        try:
            return self._types[gpu_id]
        except KeyError:
            raise UnknownGpuType(gpu_id, [g.id for g in self.offered()]) from None

    def all(self) -> tuple[GpuType, ...]:
        return tuple(self._types.values())

    def offered(self) -> tuple[GpuType, ...]:
        return tuple(g for g in self._types.values() if g.offered)

    def allowed_for(self, tier: str) -> tuple[GpuType, ...]:
        """The types an account on ``tier`` may start training on."""
        return tuple(g for g in self._types.values() if g.allowed_for(tier))

    def __contains__(self, gpu_id: object) -> bool:
        return gpu_id in self._types

    def __iter__(self) -> Iterator[GpuType]:
        return iter(self._types.values())

    def __len__(self) -> int:
        return len(self._types)

    def __repr__(self) -> str:
        return f"Catalogue({len(self)} types, {len(self.offered())} offered)"


def _tier_rank(tier: str) -> int:
    try:
        return TIERS.index(tier)
    except ValueError:
        raise ValueError(f"unknown tier '{tier}': choose one of {', '.join(TIERS)}") from None


MAX_HOST_VCPUS = 1024
OLDER_ARCHITECTURES = ("Ampere", "Volta", "Turing")


def host_rule(gpu_id: str, architecture: str, vram_gb: float) -> tuple[int, float]:
    """(vCPUs, RAM GB) a rented host gives with one GPU, when nobody stated it: a documented rule, not a quote.

    Marketplace hosts sell each GPU with a slice of its server. The rule: 8 vCPUs for every card up to 48 GB and
    for the Ampere-and-older generation whatever its memory (A100 servers are older hosts, sliced at 8 vCPUs per
    GPU); 16 vCPUs for the 80-96 GB cards of later generations (H100, RTX PRO 6000); 24 vCPUs from 141 GB up
    (H200, B200, B300). RAM: 1.5 x the GPU's memory, at least 32 GB (enough to cache a dataset the size of the
    card's batches). ``cpu`` is the local machine, measured at run time, not by this rule."""
    if gpu_id == "cpu" or vram_gb <= 0:
        return 8, 32.0
    if vram_gb >= 120:
        vcpus = 24
    elif vram_gb >= 80 and not architecture.startswith(OLDER_ARCHITECTURES):
        vcpus = 16
    else:
        vcpus = 8
    return vcpus, float(max(32, round(1.5 * vram_gb)))


def _optional_float(text: str) -> float | None:
    text = text.strip()
    return float(text) if text else None


def _read_default_rows() -> tuple[list[GpuType], frozenset[str]]:
    """Parse the packaged CSV; also return the ids that have no list price (reference-only rows)."""
    text = resources.files("lanner.gpus").joinpath("catalogue.csv").read_text(encoding="utf-8")
    types: list[GpuType] = []
    unpriced: set[str] = set()
    for row in csv.DictReader(io.StringIO(text)):
        price = _optional_float(row["price_per_hour"])
        if price is None:
            unpriced.add(row["id"])
        vcpus, ram = host_rule(row["id"], row["architecture"], float(row["vram_gb"]))
        types.append(GpuType(
            id=row["id"], display_name=row["display_name"], architecture=row["architecture"],
            vram_gb=float(row["vram_gb"]), bandwidth_gbs=_optional_float(row["bandwidth_gbs"]),
            fp32_tflops=_optional_float(row["fp32_tflops"]), fp16_tflops=_optional_float(row["fp16_tflops"]),
            price_per_hour=price or 0.0, min_tier=row["min_tier"].strip() or "free",
            offered=row["offered"].strip().lower() == "yes", source=row["source"],
            tdp_w=_optional_float(row["tdp_w"]), host_vcpus=vcpus, host_ram_gb=ram,
            multi_gpu_efficiency=_optional_float(row["multi_gpu_efficiency"]),
        ))
    return types, frozenset(unpriced)


@lru_cache(maxsize=1)
def _defaults() -> tuple[tuple[GpuType, ...], frozenset[str]]:
    types, unpriced = _read_default_rows()
    return tuple(types), unpriced


# ---------------------------------------------------------------------------------------------- overrides


_ENTRY_FIELDS = frozenset(f.name for f in fields(GpuType)) - {"id"}


def _number(value: Any, where: str, *, nullable: bool) -> float | None:
    if value is None:
        if nullable:
            return None
        raise ValueError(f"{where}: must be a number, not null")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where}: must be a finite number, got {value!r}")
    if value < 0:
        raise ValueError(f"{where}: must not be negative, got {value!r}")
    return float(value)


def _entry_changes(gpu_id: str, entry: Any) -> dict[str, Any]:
    """Validate one ``gpus.<id>`` object and return it as dataclass field values."""
    where = f"gpus.{gpu_id}"
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where}: must be an object of fields, got {type(entry).__name__}")
    changes: dict[str, Any] = {}
    for name, value in entry.items():
        field_where = f"{where}.{name}"
        if name not in _ENTRY_FIELDS:
            raise ValueError(f"{field_where}: unknown field; allowed: {', '.join(sorted(_ENTRY_FIELDS))}")
        if name in _NUMBER_FIELDS:
            changes[name] = _number(value, field_where, nullable=name in _NULLABLE_FIELDS)
        elif name in _TEXT_FIELDS:
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{field_where}: must be a non-empty string")
            changes[name] = value.strip()
        elif name == "min_tier":
            if value not in TIERS:
                raise ValueError(f"{field_where}: unknown tier {value!r}; choose one of {', '.join(TIERS)}")
            changes[name] = value
        elif name == "offered":
            if not isinstance(value, bool):
                raise ValueError(f"{field_where}: must be true or false")
            changes[name] = value
        elif name == "host_vcpus":
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_HOST_VCPUS:
                raise ValueError(f"{field_where}: must be a whole number of vCPUs from 1 to {MAX_HOST_VCPUS}, "
                                 f"got {value!r}")
            changes[name] = value
        elif name == "multi_gpu_efficiency":
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                      or not 0 < value <= 1):
                raise ValueError(f"{field_where}: must be a number above 0 and at most 1 (or null: one GPU per "
                                 f"run), got {value!r}")
            changes[name] = None if value is None else float(value)
    if changes.get("host_ram_gb") == 0:
        raise ValueError(f"{where}.host_ram_gb: must be more than 0")
    return changes


def apply_overrides(base: Catalogue, overrides: Mapping[str, Any], *, unpriced: frozenset[str] = frozenset(),
                    base_dir: Path | None = None) -> Catalogue:
    """Return ``base`` changed by an operator's overrides; raise ``ValueError`` naming the offending field.

    Shape (JSON or YAML)::

        {"offered": ["cpu", "rtx-4090"],                       # optional: exactly these are offered
         "gpus": {"rtx-4090": {"price_per_hour": 0.0, "min_tier": "pro", "host_vcpus": 16, "host_ram_gb": 64},
                  "my-lab-a6000": {"display_name": "Lab A6000", "architecture": "Ampere",
                                   "vram_gb": 48, "price_per_hour": 0.1}}}

    Fields in ``gpus.<id>`` are ``GpuType`` fields (snake_case). A new id needs at least display_name,
    architecture, vram_gb and price_per_hour; it is offered unless it says otherwise or the ``offered``
    list leaves it out. A type without a list price (reference-only rows) can be offered only with a price.
    ``calibration`` (a path or a list of paths, relative to the settings file's folder) names calibration files
    written by ``benchmarks/gpu_calibrate.py``: measured priors for their GPU types. ``host_vcpus`` (a whole
    number) and ``host_ram_gb`` describe the host that comes with one GPU; a new type without them gets
    ``host_rule``'s. ``multi_gpu_efficiency`` (above 0, at most 1; null: one GPU per run) is DDP's per-GPU scaling
    on one node; a new type without it gets the PCIe default (``MULTI_GPU_EFFICIENCY``).
    """
    if not isinstance(overrides, Mapping):
        raise ValueError(f"{SETTING}: must be an object with 'offered' and/or 'gpus', got {type(overrides).__name__}")
    unknown = set(overrides) - {"offered", "gpus", "calibration"}
    if unknown:
        raise ValueError(f"{sorted(unknown)[0]}: unknown field; allowed top-level fields: calibration, gpus, offered")

    types: dict[str, GpuType] = {g.id: g for g in base}
    priced: set[str] = {gpu_id for gpu_id in types if gpu_id not in unpriced}
    explicit_offered: dict[str, bool] = {}

    gpus = overrides.get("gpus")
    gpus = {} if gpus is None else gpus  # `gpus:` left empty in YAML
    if not isinstance(gpus, Mapping):
        raise ValueError("gpus: must be an object keyed by GPU type id")
    for gpu_id, entry in gpus.items():
        if not isinstance(gpu_id, str) or not _ID_PATTERN.match(gpu_id):
            raise ValueError(f"gpus.{gpu_id}: invalid GPU type id; use lowercase letters, digits, '.', '_', '-'")
        changes = _entry_changes(gpu_id, entry)
        if "price_per_hour" in changes:
            priced.add(gpu_id)
        if "offered" in changes:
            explicit_offered[gpu_id] = changes["offered"]
        if gpu_id in types:
            types[gpu_id] = replace(types[gpu_id], **changes)
            continue
        missing = [name for name in _NEW_TYPE_REQUIRED if name not in changes]
        if missing:
            raise ValueError(f"gpus.{gpu_id}.{missing[0]}: required for a new GPU type "
                             f"(a new type needs {', '.join(_NEW_TYPE_REQUIRED)})")
        vcpus, ram = host_rule(gpu_id, changes["architecture"], changes["vram_gb"])
        defaults: dict[str, Any] = {"bandwidth_gbs": None, "fp32_tflops": None, "fp16_tflops": None,
                                    "min_tier": "free", "offered": True, "source": f"operator override ({SETTING})",
                                    "host_vcpus": vcpus, "host_ram_gb": ram}
        types[gpu_id] = GpuType(id=gpu_id, **{**defaults, **changes})

    if "offered" in overrides:
        offered = overrides["offered"]
        if not isinstance(offered, list) or not all(isinstance(item, str) for item in offered):
            raise ValueError("offered: must be a list of GPU type ids")
        for item in offered:
            if item not in types:
                raise ValueError(f"offered: unknown GPU type '{item}'; add it under 'gpus' first")
        wanted = set(offered)
        for gpu_id, value in explicit_offered.items():
            if value != (gpu_id in wanted):
                raise ValueError(f"gpus.{gpu_id}.offered: contradicts the 'offered' list")
        types = {gpu_id: replace(gpu, offered=gpu_id in wanted) for gpu_id, gpu in types.items()}

    for gpu in types.values():
        if gpu.offered and gpu.id not in priced:
            raise ValueError(f"gpus.{gpu.id}.price_per_hour: '{gpu.id}' has no list price; set one to offer it")
    return Catalogue(list(types.values()), _calibration_files(overrides.get("calibration"), set(types), base_dir))


def _calibration_files(value: Any, known: set[str], base_dir: Path | None) -> tuple[MeasuredSet, ...]:
    if value is None:
        return ()
    paths = [value] if isinstance(value, str) else value
    if not isinstance(paths, list) or not all(isinstance(p, str) and p.strip() for p in paths):
        raise ValueError("calibration: must be a path or a list of paths to calibration JSON files")
    return tuple(measured_files.load((base_dir or Path.cwd()) / Path(p).expanduser(), known=frozenset(known))
                 for p in paths)


@lru_cache(maxsize=1)
def _packaged() -> Catalogue:
    return Catalogue(_defaults()[0])


def load_catalogue(overrides: Mapping[str, Any] | None = None, *, base_dir: Path | None = None) -> Catalogue:
    """The packaged catalogue with ``overrides`` applied (see ``apply_overrides``): a builder for explicit
    overrides. The server's catalogue, which honours ``LANNER_GPU_CATALOGUE``, is ``get_catalogue``."""
    if overrides is None or (isinstance(overrides, Mapping) and not overrides):
        return _packaged()  # parsed once per process
    return apply_overrides(_packaged(), overrides, unpriced=_defaults()[1], base_dir=base_dir)


def _parse_setting(value: str) -> Any:
    text = value.strip()
    if text.startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{SETTING}: inline JSON is invalid: {exc}") from None
    path = Path(text).expanduser()
    if not path.is_file():
        raise ValueError(f"{SETTING}: no such file '{path}' (give a .json/.yaml path or inline JSON)")
    content = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        try:
            return json.loads(content)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{SETTING}: '{path}' is not valid JSON: {exc}") from None
    import yaml  # only needed for YAML files; PyYAML comes with ultralytics

    try:
        return yaml.safe_load(content)
    except yaml.YAMLError as exc:
        raise ValueError(f"{SETTING}: '{path}' is not valid YAML: {exc}") from None


@lru_cache(maxsize=16)
def _from_setting(value: str | None) -> Catalogue:
    if value is None or not value.strip():
        return load_catalogue()
    text = value.strip()
    base_dir = None if text.startswith("{") else Path(text).expanduser().parent
    return load_catalogue(_parse_setting(value), base_dir=base_dir)  # None (an empty YAML file): no overrides


class CatalogueSetting(Protocol):
    """What ``get_catalogue`` reads of ``lanner.config.Settings``."""

    gpu_catalogue: str | None


def get_catalogue(settings: CatalogueSetting) -> Catalogue:
    """The one way to the server's catalogue: the packaged one with ``LANNER_GPU_CATALOGUE`` applied (a JSON/YAML
    path or inline JSON). Cached per setting value: a changed file is read again only on restart. Raises
    ``ValueError`` naming the offending field, so ``create_app`` can refuse to start on a bad value."""
    return _from_setting(settings.gpu_catalogue)
