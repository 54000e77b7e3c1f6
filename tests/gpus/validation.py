"""The public validation cases (``validation_cases.json``) and how a case is replayed through the memory model.

Shared by ``test_validation.py`` (pass/fail) and ``benchmarks/gpu_validation.py`` (the error table), so both judge
the same numbers. The reports come from ultralytics 8.0.x (2023), whose AutoBatch differed from today's in three
ways that matter when its log lines are read back:

- ``profile()`` printed ``memory_reserved() / 1e9``: its rows are in 1e9-byte GB, while the free memory it solved
  for was in GiB (``/ 2**30``). Solving the line in those mixed units is the same as aiming at
  ``fraction * 1e9 / 2**30`` of the free GiB, which is how ``autobatch_choice`` replays it.
- it backpropagated ``y.sum()`` unless the output was a list. A segmentation model returns a tuple in training
  mode, so for it ``backward()`` raised, was swallowed, and each of the three timed passes built a graph that
  stayed alive while the next forward ran: a seg row holds two forward graphs and no gradients.
- no loss envelope (``max_num_obj`` arrived in 8.3.31).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lanner.gpus import memory
from lanner.gpus.memory import GIB
from lanner.gpus.profile import model_profile

CASES: list[dict[str, Any]] = json.loads(Path(__file__).with_name("validation_cases.json").read_text())["cases"]
LEGACY_GB = 1e9 / GIB  # 8.0.x profile rows: 1e9-byte GB


def reported_probe_gib(case: dict[str, Any]) -> float:
    """The profile row as torch's GiB (the log printed 1e9-byte GB)."""
    return case["memory_gb"] * LEGACY_GB


def probe_gib(case: dict[str, Any]) -> float:
    """8.0.x's AutoBatch profile row, predicted: the trainer's model, the probe's copy, its grads and the fp16
    weight cache of autocast, plus the saved activations of one graph (and backward's transients). A tuple output
    (segmentation) never ran backward: no grads, two graphs alive at once, no backward transients."""
    profile = model_profile(case["model"], nc=case["nc"])
    saved = memory.activation_bytes_per_image(profile, case["imgsz"]) * memory.AMP_FACTOR * case["batch"]
    if profile.task == "segment":
        return (10 * profile.params + 2 * saved * memory.K_ACT / memory.BACKWARD_TRANSIENT) / GIB
    return (14 * profile.params + saved * memory.K_ACT) / GIB


def autobatch_choice(case: dict[str, Any]) -> int:
    """8.0.x's AutoBatch replayed: no loss envelope, the line in GB solved for a fraction of free GiB."""
    profile = model_profile(case["model"], nc=case["nc"])
    return memory.autobatch_batch(case["vram_gib"], profile, imgsz=case["imgsz"],
                                  fraction=case["autobatch_fraction"] * LEGACY_GB, max_objects=0)


def planning(case: dict[str, Any]) -> tuple[float, float, int]:
    """(expected and planning device memory at the case's batch, largest batch that fits), with SGD as those
    trainings used."""
    profile = model_profile(case["model"], nc=case["nc"])
    kwargs = {"imgsz": case["imgsz"], "optimizer": "SGD", "max_objects": case["max_objects"]}
    expected = memory.training_memory(profile, batch=case["batch"], **kwargs).device_gb
    need = memory.training_memory(profile, batch=case["batch"], planning=True, **kwargs).device_gb
    return expected, need, memory.max_batch(case["vram_gib"], profile, **kwargs)


def train_seconds(case: dict[str, Any], host_cpus: float | None = None) -> tuple[float, bool]:
    """(predicted training seconds of one epoch, loader-bound) from the priors alone, as the advisor computes them
    for a fresh installation: the type's prior speed, the rented-host loader prior and the host the catalogue gives
    the type (``host_cpus`` overrides it). ``a100-40gb-sxm`` is not offered; A2's card specs stand in for it."""
    from lanner.gpus import advisor, fit, priors
    from lanner.gpus.catalogue import load_catalogue
    from lanner.gpus.estimator import Workload, estimate_time

    catalogue = load_catalogue()
    profile = model_profile(case["model"], nc=case["nc"])
    reference = catalogue.get("a100-80gb-sxm")
    if case["gpu"] == "a100-40gb-sxm":
        specs = priors.catalogue_specs(catalogue.all())
        speed = priors.gpu_prior(priors.power_law_speed(specs, priors.A2_GPU_SPECS), "prior",
                                 priors.A2_GPU_SPECS[0], specs)
        gpu = reference
    else:
        gpu = catalogue.get(case["gpu"])
        speed = fit.prior_speed(catalogue, gpu)
    cpus = host_cpus if host_cpus is not None else advisor.host_cpus(gpu)
    saved = memory.activation_bytes_per_image(profile, case["imgsz"]) * (memory.AMP_FACTOR if case["amp"] else 1.0)
    work = Workload(gflops=profile.gflops(case["imgsz"]), train_images=case["train_images"], val_images=0, epochs=1,
                    batch=case["batch"], imgsz=case["imgsz"], host_cpus=cpus, cache=bool(case["cache"]),
                    workers=advisor.loader_workers(case["workers"], cpus, case["train_images"], case["batch"]),
                    activation_bytes=saved, task=profile.task)
    result = estimate_time(work, speed, fit.loader_prior(gpu), priors.CLOUD_FIXED)
    return result.breakdown["train_per_epoch"], result.loader_bound
