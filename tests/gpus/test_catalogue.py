"""GPU catalogue: covers every SDK ``gpu_type``, matches the reference prices, honours tiers and overrides."""

from __future__ import annotations

import csv
import inspect
import json
import typing
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from ultralytics_platform.resources.training import Training

from lanner.gpus.catalogue import (
    TIERS,
    Catalogue,
    GpuType,
    UnknownGpuType,
    get_catalogue,
    load_catalogue,
)
from lanner.training.dependencies import catalogue_dependency

REFERENCE_CSV = Path("/work/shared/reference/gpus.csv")
PACKAGED_CSV = Path(__file__).parents[2] / "lanner" / "gpus" / "catalogue.csv"


def setting(value: str | None) -> Any:
    """Settings with ``LANNER_GPU_CATALOGUE`` set to ``value``, as ``get_catalogue`` reads them."""
    return SimpleNamespace(gpu_catalogue=value)


def sdk_gpu_types() -> set[str]:
    """The ``Literal`` members of ``Training.start(gpu_type=...)``, read from the installed SDK."""
    hints = typing.get_type_hints(Training.start, globalns=vars(inspect.getmodule(Training)))
    found: set[str] = set()

    def walk(annotation: Any) -> None:
        if typing.get_origin(annotation) is typing.Literal:
            found.update(a for a in typing.get_args(annotation) if isinstance(a, str))
        for arg in typing.get_args(annotation):
            walk(arg)

    walk(hints["gpu_type"])
    return found


# ------------------------------------------------------------------------------------------- coverage


def test_every_sdk_gpu_type_and_cpu_are_offered():
    sdk_types = sdk_gpu_types()
    assert len(sdk_types) >= 26 and {"rtx-2000-ada", "b300"} <= sdk_types
    catalogue = load_catalogue()
    offered = {g.id for g in catalogue.offered()}
    assert sdk_types | {"cpu"} <= offered, f"missing: {sorted(sdk_types | {'cpu'} - offered)}"


def test_reference_only_rows_are_kept_but_not_offered():
    catalogue = load_catalogue()
    for gpu_id in ("v100-sxm2-32gb", "t4"):
        gpu = catalogue.get(gpu_id)
        assert gpu.offered is False and gpu.allowed_for("enterprise") is False and gpu.source


def test_cpu_row():
    cpu = load_catalogue().get("cpu")
    assert (cpu.vram_gb, cpu.price_per_hour, cpu.min_tier, cpu.fp32_tflops) == (0.0, 0.5, "free", None)


def test_spot_values_and_sources():
    catalogue = load_catalogue()
    assert catalogue.get("rtx-4090").price_per_hour == 0.69 and catalogue.get("rtx-4090").vram_gb == 24
    assert catalogue.get("h200-sxm").vram_gb == 141 and catalogue.get("h200-sxm").fp16_tflops == 989.0
    assert catalogue.get("b300").price_per_hour == 7.39 and catalogue.get("b300").architecture.startswith("Blackwell")
    assert all(g.source for g in catalogue)


@pytest.mark.skipif(not REFERENCE_CSV.exists(), reason="shared reference table not available here")
def test_matches_reference_csv():
    catalogue = load_catalogue()
    rows = list(csv.DictReader(REFERENCE_CSV.open()))
    for row in rows:
        gpu = catalogue.get(row["id"])
        assert gpu.vram_gb == float(row["vram_gb"]), row["id"]
        assert gpu.bandwidth_gbs == float(row["mem_bandwidth_gbs"]), row["id"]
        assert gpu.fp32_tflops == float(row["fp32_tflops"]), row["id"]
        assert gpu.fp16_tflops == float(row["fp16_tensor_dense_tflops"]), row["id"]
        assert gpu.offered == (row["in_catalogue"] == "yes"), row["id"]
        assert gpu.source == row["source"], row["id"]
        if row["hosted_price_usd_per_hour"]:
            assert gpu.price_per_hour == float(row["hosted_price_usd_per_hour"]), row["id"]
            assert gpu.min_tier == row["hosted_min_tier"], row["id"]
    assert {r["id"] for r in rows} | {"cpu"} == {g.id for g in catalogue}


def test_packaged_csv_has_source_column():
    header = PACKAGED_CSV.read_text().splitlines()[0].split(",")
    assert header[0] == "id" and "source" in header


# --------------------------------------------------------------------------------------------- tiers


def test_tiers_match_accounts():
    from lanner.accounts.service import TIERS as ACCOUNT_TIERS

    assert TIERS == ACCOUNT_TIERS


def test_top_gpus_need_pro():
    catalogue = load_catalogue()
    for gpu_id in ("h200-nvl", "h200-sxm", "b200", "b300"):
        gpu = catalogue.get(gpu_id)
        assert gpu.min_tier == "pro"
        assert not gpu.allowed_for("free") and gpu.allowed_for("pro") and gpu.allowed_for("enterprise")
    assert catalogue.get("h100-sxm").allowed_for("free")
    free_ids = {g.id for g in catalogue.allowed_for("free")}
    assert "b200" not in free_ids and "cpu" in free_ids and "t4" not in free_ids


def test_unknown_tier_and_unknown_type_are_clear():
    with pytest.raises(ValueError, match="unknown tier 'gold'"):
        load_catalogue().get("l4").allowed_for("gold")
    with pytest.raises(KeyError) as exc:
        load_catalogue().get("tpu-v5")
    assert isinstance(exc.value, UnknownGpuType)
    assert str(exc.value).startswith("unknown GPU type 'tpu-v5': choose one of cpu, ")


def test_catalogue_is_immutable_and_cached():
    catalogue = load_catalogue()
    assert catalogue is load_catalogue() and catalogue is get_catalogue(setting(None))
    assert isinstance(catalogue.all(), tuple)
    with pytest.raises(AttributeError):
        catalogue.get("l4").price_per_hour = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        catalogue._types["l4"] = catalogue.get("cpu")  # type: ignore[index]


# ------------------------------------------------------------------------------------------ overrides

LAB_A6000 = {"display_name": "Lab RTX A6000", "architecture": "Ampere (GA102)", "vram_gb": 48,
             "price_per_hour": 0.1, "fp32_tflops": 38.7}


def test_overrides_change_price_tier_offered_and_add_a_type():
    catalogue = load_catalogue({
        "offered": ["cpu", "rtx-4090", "my-lab-a6000"],
        "gpus": {"rtx-4090": {"price_per_hour": 0.0, "min_tier": "pro"}, "my-lab-a6000": LAB_A6000},
    })
    assert [g.id for g in catalogue.offered()] == ["cpu", "rtx-4090", "my-lab-a6000"]
    rtx = catalogue.get("rtx-4090")
    assert rtx.price_per_hour == 0.0 and rtx.min_tier == "pro" and rtx.vram_gb == 24
    assert not rtx.allowed_for("free") and rtx.allowed_for("pro")
    lab = catalogue.get("my-lab-a6000")
    assert lab == GpuType(id="my-lab-a6000", display_name="Lab RTX A6000", architecture="Ampere (GA102)",
                          vram_gb=48.0, bandwidth_gbs=None, fp32_tflops=38.7, fp16_tflops=None, price_per_hour=0.1,
                          min_tier="free", offered=True, source=lab.source, host_vcpus=8, host_ram_gb=72.0)
    assert catalogue.get("b300").offered is False and not catalogue.get("b300").allowed_for("enterprise")
    assert load_catalogue().get("rtx-4090").price_per_hour == 0.69, "defaults must not change"


def test_new_type_is_offered_without_an_offered_list():
    catalogue = load_catalogue({"gpus": {"lab": LAB_A6000, "l4": {"offered": False}}})
    assert catalogue.get("lab").offered and not catalogue.get("l4").offered and catalogue.get("b200").offered


def test_reference_only_type_can_be_offered_with_a_price():
    catalogue = load_catalogue({"gpus": {"t4": {"offered": True, "price_per_hour": 0.0}}})
    assert catalogue.get("t4").allowed_for("free")


@pytest.mark.parametrize(("overrides", "named"), [
    ({"gpus": {"l4": {"price_per_hour": -1}}}, "gpus.l4.price_per_hour"),
    ({"gpus": {"l4": {"price_per_hour": "cheap"}}}, "gpus.l4.price_per_hour"),
    ({"gpus": {"l4": {"price_per_hour": True}}}, "gpus.l4.price_per_hour"),
    ({"gpus": {"l4": {"price_per_hour": None}}}, "gpus.l4.price_per_hour"),
    ({"gpus": {"l4": {"vram_gb": float("nan")}}}, "gpus.l4.vram_gb"),
    ({"gpus": {"l4": {"min_tier": "gold"}}}, "gpus.l4.min_tier"),
    ({"gpus": {"l4": {"pricePerHour": 1.0}}}, "gpus.l4.pricePerHour"),
    ({"gpus": {"l4": {"offered": "yes"}}}, "gpus.l4.offered"),
    ({"gpus": {"l4": {"display_name": ""}}}, "gpus.l4.display_name"),
    ({"gpus": {"l4": 3}}, "gpus.l4"),
    ({"gpus": {"Bad Id": LAB_A6000}}, "gpus.Bad Id"),
    ({"gpus": {"lab": {"display_name": "Lab"}}}, "gpus.lab.architecture"),
    ({"gpus": []}, "gpus"),
    ({"offered": ["cpu", "tpu-v5"]}, "offered"),
    ({"offered": "cpu"}, "offered"),
    ({"offered": ["cpu"], "gpus": {"l4": {"offered": True}}}, "gpus.l4.offered"),
    ({"offered": ["t4"]}, "gpus.t4.price_per_hour"),
    ({"gpus": {"t4": {"offered": True}}}, "gpus.t4.price_per_hour"),
    ({"prices": {}}, "prices"),
])
def test_bad_overrides_name_the_field(overrides: dict, named: str):
    with pytest.raises(ValueError) as exc:
        load_catalogue(overrides)
    assert str(exc.value).startswith(f"{named}:"), str(exc.value)


# -------------------------------------------------------------------------------------------- setting


def test_setting_inline_json_json_file_and_yaml_file(tmp_path: Path):
    overrides = {"offered": ["cpu", "rtx-4090"], "gpus": {"rtx-4090": {"price_per_hour": 0.2}}}
    inline = get_catalogue(setting(json.dumps(overrides)))
    json_file = tmp_path / "gpus.json"
    json_file.write_text(json.dumps(overrides))
    yaml_file = tmp_path / "gpus.yaml"
    yaml_file.write_text("offered: [cpu, rtx-4090]\ngpus:\n  rtx-4090:\n    price_per_hour: 0.2\n")
    for catalogue in (inline, get_catalogue(setting(str(json_file))), get_catalogue(setting(str(yaml_file)))):
        assert [g.id for g in catalogue.offered()] == ["cpu", "rtx-4090"]
        assert catalogue.get("rtx-4090").price_per_hour == 0.2
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert get_catalogue(setting(str(empty))) is load_catalogue()
    assert get_catalogue(setting("  ")) is load_catalogue()


def test_setting_errors_name_the_setting(tmp_path: Path):
    with pytest.raises(ValueError, match="LANNER_GPU_CATALOGUE: no such file"):
        get_catalogue(setting(str(tmp_path / "missing.yaml")))
    with pytest.raises(ValueError, match="LANNER_GPU_CATALOGUE: inline JSON is invalid"):
        get_catalogue(setting("{offered: }"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("offered: [cpu\n")
    with pytest.raises(ValueError, match="is not valid YAML"):
        get_catalogue(setting(str(broken)))
    listed = tmp_path / "list.yaml"
    listed.write_text("- cpu\n")
    with pytest.raises(ValueError, match="LANNER_GPU_CATALOGUE: must be an object"):
        get_catalogue(setting(str(listed)))


def test_get_catalogue_reads_the_setting_and_caches_per_value():
    inline = json.dumps({"gpus": {"l4": {"price_per_hour": 0.01}}})
    first = get_catalogue(setting(inline))
    assert first.get("l4").price_per_hour == 0.01 and get_catalogue(setting(inline)) is first
    assert get_catalogue(setting(None)) is load_catalogue()


# ------------------------------------------------------------------------------------------------ API


@pytest.fixture
def gpu_client(app: Any) -> Iterator[TestClient]:
    """The full app; ``create_app`` mounts the catalogue router."""
    with TestClient(app) as test_client:
        yield test_client
    app.dependency_overrides.clear()


def test_api_requires_a_key(gpu_client: TestClient):
    response = gpu_client.get("/api/gpus")
    assert response.status_code == 401 and response.json()["code"] == "unauthorized"


def test_api_lists_the_catalogue_for_the_callers_tier(gpu_client: TestClient, make_account):
    free = make_account("freeuser")
    pro = make_account("prouser", tier="pro")
    body = gpu_client.get("/api/gpus", headers=free.headers).json()
    assert body["tiers"] == ["free", "pro", "enterprise"]
    items = {item["id"]: item for item in body["gpus"]}
    assert set(items) == {g.id for g in load_catalogue()}
    assert set(items["rtx-4090"]) == {"id", "displayName", "architecture", "vramGb", "bandwidthGbs", "fp32Tflops",
                                      "fp16Tflops", "pricePerHour", "minTier", "offered", "allowed", "hostVcpus",
                                      "hostRamGb", "multiGpuEfficiency"}
    assert items["a100-80gb-sxm"]["hostVcpus"] == 8 and items["h100-sxm"]["hostVcpus"] == 16
    assert items["h100-sxm"]["multiGpuEfficiency"] == 0.85 and items["cpu"]["multiGpuEfficiency"] is None
    assert items["rtx-4090"]["pricePerHour"] == 0.69 and items["rtx-4090"]["allowed"] is True
    assert items["cpu"]["fp32Tflops"] is None and items["cpu"]["vramGb"] == 0
    for gpu_id in ("h200-sxm", "b200", "b300"):
        assert items[gpu_id]["minTier"] == "pro" and items[gpu_id]["allowed"] is False
    assert items["t4"]["offered"] is False and items["t4"]["allowed"] is False
    pro_items = {i["id"]: i for i in gpu_client.get("/api/gpus", headers=pro.headers).json()["gpus"]}
    assert pro_items["b300"]["allowed"] is True and pro_items["t4"]["allowed"] is False


def test_api_uses_the_operator_catalogue(app: Any, gpu_client: TestClient, make_account):
    custom = load_catalogue({"offered": ["cpu", "lab"], "gpus": {"lab": LAB_A6000}})
    app.dependency_overrides[catalogue_dependency] = lambda: custom
    account = make_account("lab")
    items = {i["id"]: i for i in gpu_client.get("/api/gpus", headers=account.headers).json()["gpus"]}
    assert items["lab"]["allowed"] is True and items["lab"]["pricePerHour"] == 0.1
    assert items["rtx-4090"]["offered"] is False


def test_api_is_documented(gpu_client: TestClient):
    operation = gpu_client.get("/openapi.json").json()["paths"]["/api/gpus"]["get"]
    assert "Lanner extension" in operation["summary"] and operation["description"]


def test_catalogue_type_is_exported():
    assert isinstance(load_catalogue(), Catalogue)


# ------------------------------------------------------------------------------------------ hosts


def test_every_type_has_a_host_by_the_documented_rule():
    catalogue = load_catalogue()
    for gpu in catalogue:
        assert gpu.host_vcpus >= 1 and gpu.host_ram_gb >= 32, gpu.id
    hosts = {g.id: (g.host_vcpus, g.host_ram_gb) for g in catalogue}
    assert hosts["a100-80gb-sxm"] == (8, 120.0)  # Ampere: an older host, 8 vCPUs whatever the memory
    assert hosts["h100-sxm"] == (16, 120.0) and hosts["rtx-pro-6000"] == (16, 144.0)
    assert hosts["h200-sxm"][0] == hosts["b300"][0] == 24
    assert hosts["rtx-4090"] == (8, 36.0) and hosts["rtx-2000-ada"] == (8, 32.0)


def test_overrides_set_the_host_and_refuse_nonsense():
    catalogue = load_catalogue({"gpus": {"a100-80gb-sxm": {"host_vcpus": 32, "host_ram_gb": 256}}})
    a100 = catalogue.get("a100-80gb-sxm")
    assert (a100.host_vcpus, a100.host_ram_gb) == (32, 256.0)
    for value, message in ((0, "from 1 to 1024"), (2.5, "whole number"), (True, "whole number"),
                           ("8", "whole number"), (5000, "from 1 to 1024")):
        with pytest.raises(ValueError, match=f"gpus.a100-80gb-sxm.host_vcpus: .*{message}"):
            load_catalogue({"gpus": {"a100-80gb-sxm": {"host_vcpus": value}}})
    for value in (0, -1, "x", float("nan")):
        with pytest.raises(ValueError, match="gpus.a100-80gb-sxm.host_ram_gb"):
            load_catalogue({"gpus": {"a100-80gb-sxm": {"host_ram_gb": value}}})


def test_a_calibration_file_is_named_in_the_setting_and_validated(tmp_path):
    document = {"format": "lanner-gpu-calibration/1", "date": "2026-12-05",
                "gpu": {"name": "NVIDIA A100-SXM4-80GB", "gpuType": "a100-80gb-sxm", "driver": "550.54",
                        "torch": "2.4.0"},
                "points": [{"model": "yolo11n.yaml", "family": "yolo11", "gflops": 6.5, "imgsz": 640, "batch": 32,
                            "trainImages": 512, "valImages": 64, "workers": 8, "hostCpus": 16,
                            "epochSeconds": 4.0, "stepSeconds": 0.2, "peakMemoryGb": 6.1},
                           {"model": "yolo11m.yaml", "status": "oom"}]}
    (tmp_path / "a100.json").write_text(json.dumps(document))
    (tmp_path / "catalogue.json").write_text(json.dumps({"calibration": ["a100.json"]}))
    catalogue = get_catalogue(setting(str(tmp_path / "catalogue.json")))
    [measured] = catalogue.measured("a100-80gb-sxm")
    assert len(measured.points) == 1 and measured.points[0].peak_memory_gb == 6.1
    assert "NVIDIA A100-SXM4-80GB" in measured.provenance and "550.54" in measured.provenance
    assert catalogue.measured("h100-sxm") == ()
    document["gpu"]["gpuType"] = "a100-40gb"
    (tmp_path / "a100.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match="gpuType: unknown GPU type 'a100-40gb'"):
        load_catalogue({"calibration": str(tmp_path / "a100.json")})
    with pytest.raises(ValueError, match="no such file"):
        load_catalogue({"calibration": [str(tmp_path / "missing.json")]})
