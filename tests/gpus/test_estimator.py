"""The pure time/cost model and the recommender: each part on its own."""

from __future__ import annotations

import math

import pytest

from lanner.billing.metering import cost_micros
from lanner.gpus.estimator import (
    DeviceSpeed,
    FixedCosts,
    LoaderSpeed,
    Option,
    Range,
    Workload,
    cents,
    cost_range_cents,
    duration_text,
    estimate_time,
    ratio_text,
    recommend,
    seed_guidance,
)

GPU = DeviceSpeed(train_tflops=40.0, step_overhead_s=0.03)
CPU = DeviceSpeed(train_tflops=0.05, step_overhead_s=0.05, overlaps_loader=False)
LOADER = LoaderSpeed(train_cpu_s_640=0.1, val_cpu_s_640=0.02)
NO_FIXED = FixedCosts(0, 0, 0, 0)


def work(**changes) -> Workload:
    base = dict(gflops=6.5, train_images=1000, val_images=200, epochs=10, batch=16, workers=8, host_cpus=16,
                imgsz=640)
    return Workload(**{**base, **changes})


def test_compute_time_scales_with_flops_when_compute_bound():
    fast_loader = LoaderSpeed(train_cpu_s_640=1e-6, val_cpu_s_640=1e-6)
    small = estimate_time(work(gflops=10, batch=256), GPU, fast_loader, NO_FIXED)
    large = estimate_time(work(gflops=40, batch=256), GPU, fast_loader, NO_FIXED)
    ratio = large.breakdown["train_per_epoch"] / small.breakdown["train_per_epoch"]
    assert 3.5 < ratio < 4.0  # 4x FLOPs, diluted only by the per-step overhead


def test_small_models_do_not_reach_peak_flops():
    fast_loader = LoaderSpeed(train_cpu_s_640=1e-6, val_cpu_s_640=1e-6)
    tiny = estimate_time(work(gflops=1, batch=16), GPU, fast_loader, NO_FIXED)
    achieved = 3 * 1e9 * 1000 / tiny.breakdown["train_per_epoch"] / 1e12
    assert achieved < 0.3 * GPU.train_tflops


def test_fast_gpu_with_few_host_cpus_is_loader_bound():
    starved = estimate_time(work(host_cpus=2, workers=2), GPU, LOADER, NO_FIXED)
    fed = estimate_time(work(host_cpus=32, workers=32, gflops=200), GPU, LOADER, NO_FIXED)
    assert starved.loader_bound and not fed.loader_bound
    assert starved.train_step_seconds == pytest.approx(starved.loader_step_seconds)


def test_cpu_adds_loading_to_compute():
    result = estimate_time(work(), CPU, LOADER, NO_FIXED)
    assert result.train_step_seconds == pytest.approx(result.compute_step_seconds + result.loader_step_seconds)


def test_larger_batch_is_faster_per_image():
    b4 = estimate_time(work(batch=4), GPU, LOADER, NO_FIXED).breakdown["train_per_epoch"]
    b64 = estimate_time(work(batch=64, host_cpus=64, workers=64), GPU, LOADER, NO_FIXED).breakdown["train_per_epoch"]
    assert b64 < b4


def test_fixed_costs_and_validation_are_counted():
    fixed = FixedCosts(provision_s=100, per_image_download_s=0.01, model_build_s=5, checkpoint_upload_s=3)
    result = estimate_time(work(epochs=1), GPU, LOADER, fixed)
    assert result.startup_seconds == pytest.approx(100 + 5 + 0.01 * 1200)
    no_val = estimate_time(work(epochs=1, val_every_epoch=False), GPU, LOADER, fixed)
    assert result.epoch_seconds.value > no_val.epoch_seconds.value
    assert result.total_seconds.value == pytest.approx(result.startup_seconds + result.epoch_seconds.value
                                                       + result.breakdown["final"] + result.breakdown["uploads"])


def test_patience_makes_a_range_not_a_point():
    with_patience = estimate_time(work(epochs=100, patience=10), GPU, LOADER, NO_FIXED, spread=(1.0, 1.0))
    assert with_patience.total_seconds.low < 0.2 * with_patience.total_seconds.value
    assert with_patience.total_seconds.high == pytest.approx(with_patience.total_seconds.value)


def test_cost_is_billed_per_second_in_micro_dollars_and_shown_rounded_up():
    assert cost_micros(60, 3.6) == 60_000          # one minute at $3.60/h = 6 cents exactly
    assert cost_micros(59.2, 3.6) == 60_000        # partial seconds are billed as whole seconds
    assert cents(60_000) == 6 and cents(60_001) == 7
    priced = cost_range_cents(Range(3600, 1800, 7200), 1.0, cost_micros)
    assert priced.as_dict(0) == {"value": 100, "low": 50, "high": 200}


def option(gpu, seconds, price, *, fits=True, allowed=True):
    total = Range(seconds, seconds * 0.8, seconds * 1.2)
    return Option(gpu, gpu.upper(), price, fits, allowed, total, cost_range_cents(total, price, cost_micros))


def test_recommendation_respects_fit_tier_deadline_and_budget():
    options = [option("small", 7200, 0.2), option("mid", 2400, 0.7), option("big", 900, 3.0),
               option("huge", 300, 6.0, allowed=False), option("tiny", 600, 0.1, fits=False)]
    plain = recommend(options)
    assert plain["cheapest"]["gpuType"] == "small" and plain["fastest"]["gpuType"] == "big"
    rushed = recommend(options, deadline_s=3600)
    assert rushed["cheapest"]["gpuType"] == "mid" and "deadline" in rushed["cheapest"]["reason"]
    broke = recommend(options, deadline_s=1000, budget_cents=20)
    assert broke["cheapest"] is None and "note" in broke
    assert all(r is None or r["gpuType"] not in ("huge", "tiny") for k, r in plain.items() if k != "note")
    assert plain["balanced"]["reason"].endswith(".")


def test_no_pick_claims_a_deadline_that_nothing_meets():
    options = [option("slow", 9000, 0.3), option("fast", 7200, 1.0)]
    result = recommend(options, deadline_s=3600)
    assert result["cheapest"] is None
    assert result["note"]["reason"] == ("No allowed GPU that fits meets your 60 min deadline; the fastest is FAST at "
                                         "2.0 h.")
    for kind in ("fastest", "balanced"):
        assert "meets your" not in result[kind]["reason"]
        assert result[kind]["reason"].endswith("; does not meet your 60 min deadline.")
    mixed = recommend(options, deadline_s=8000, budget_cents=10)  # fast meets the deadline, not the budget
    assert mixed["fastest"]["reason"].endswith("; does not meet your $0.10 budget.")
    met = recommend(options, deadline_s=7500)
    assert met["cheapest"]["gpuType"] == "fast" and met["balanced"]["reason"].endswith("meets your 2.1 h deadline.")


@pytest.mark.parametrize("seconds, shown", [
    (0, "<0.1 s"), (0.04, "<0.1 s"), (0.4, "0.4 s"), (3.25, "3.2 s"), (12.4, "12 s"), (89, "89 s"),
    (150, "2.5 min"), (1200, "20 min"), (5399, "90 min"), (9000, "2.5 h"),
])
def test_durations_are_shown_with_sensible_precision(seconds, shown):
    assert duration_text(seconds) == shown


def test_ratios_that_show_as_one_are_not_called_faster_or_dearer():
    cheap = option("cheap", 1000, 1.0)
    assert ratio_text(option("same", 1010, 1.02), cheap) == ""  # 1.0x faster for 1.0x the price: nothing to say
    assert ratio_text(option("dear", 990, 2.0), cheap) == " (about as fast as CHEAP for 2.0x the price)"
    assert ratio_text(option("quick", 400, 1.04), cheap) == " (2.5x faster than CHEAP at about the same price)"
    assert ratio_text(option("both", 500, 3.0), cheap) == " (2.0x faster than CHEAP for 3.0x the price)"
    assert ratio_text(option("slower", 2000, 0.5), cheap) == " (2.0x slower than CHEAP for 0.5x the price)"
    pick = recommend([cheap, option("same", 1010, 1.02)])
    assert "1.0x" not in pick["fastest"]["reason"] + pick["balanced"]["reason"]


def test_seed_guidance_bands():
    assert seed_guidance(500)["band"] == "small"
    assert seed_guidance(5000)["band"] == "medium"
    assert seed_guidance(50000)["band"] == "large"
    assert math.isfinite(len(seed_guidance(999)["rule"]))


def test_gpu_time_follows_activations_when_the_device_has_an_activation_rate():
    fast_loader = LoaderSpeed(train_cpu_s_640=1e-6, val_cpu_s_640=1e-6)
    gpu = DeviceSpeed(train_tflops=40.0, step_overhead_s=0.03, activation_gbs=50.0, peak_tflops=300.0)
    small = estimate_time(work(gflops=10, activation_bytes=1e8), gpu, fast_loader, NO_FIXED)
    more_flops = estimate_time(work(gflops=40, activation_bytes=1e8), gpu, fast_loader, NO_FIXED)
    more_bytes = estimate_time(work(gflops=10, activation_bytes=2e8), gpu, fast_loader, NO_FIXED)
    assert more_flops.compute_step_seconds == pytest.approx(small.compute_step_seconds)  # below the compute roof
    assert more_bytes.compute_step_seconds == pytest.approx(0.03 + 16 * 2e8 / 50e9)
    roofed = estimate_time(work(gflops=2000, activation_bytes=1e8), gpu, fast_loader, NO_FIXED)
    assert roofed.compute_step_seconds == pytest.approx(0.03 + 16 * 3 * 2000e9 / 300e12)
    # unknown activations, or a device without an activation rate (the CPU): the FLOP model, unchanged
    assert estimate_time(work(activation_bytes=0), gpu, LOADER, NO_FIXED).compute_step_seconds == pytest.approx(
        estimate_time(work(), GPU, LOADER, NO_FIXED).compute_step_seconds)
    assert estimate_time(work(activation_bytes=1e8, task="segment"), CPU, LOADER, NO_FIXED).epoch_seconds == \
        estimate_time(work(), CPU, LOADER, NO_FIXED).epoch_seconds
