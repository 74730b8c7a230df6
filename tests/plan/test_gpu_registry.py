"""Adding a GPU is a data change (issue 29): a GPU entry and the instance types that carry it in the instance
table, and nothing else. A GPU without calibrated constants borrows the measured efficiencies of a calibrated
GPU of its own form factor, says which, and never takes a PCIe card's for an SXM part (or back) silently."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from modelfleet.errors import CompileError, SpecError
from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.hardware.instances import GpuType, catalogue_from_data, load_instance_catalogue
from modelfleet.plan.llm.speed.calibration import (PerformanceTable, calibrated_kin, gpu_for, gpu_performance,
                                                   load_performance_table)
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.load import parse_fleet_text

SHIPPED = Path(__file__).resolve().parents[2] / "modelfleet" / "data" / "instances.yaml"
B200 = {"name": "NVIDIA B200", "memory_gib": 178.0, "fp16_tflops": 2250, "memory_bandwidth_gbs": 8000,
        "compute_capability": 10.0, "form_factor": "sxm"}
P6 = {"family": "p6-b200", "gpu": "b200", "gpus": 8, "vcpu": 192, "ram_gib": 2048,
      "usd_per_hour": {"us-east-1": 113.9}, "eni_max_pods": 198, "instance_store_gb": 30720}
CHAT = textwrap.dedent("""\
    models:
      - name: chat
        type: llm
        artifact: acme/chat
        size: {dtype: bf16}
        architecture: llama-3.3-70b
        sla: {max_context_tokens: 8192, peak_concurrent_sequences: 64, p99_ttft_ms: 3000}
    """)


def with_gpu(key: str, gpu: dict, instance_type: str, instance: dict) -> dict:
    data = yaml.safe_load(SHIPPED.read_text())
    data["gpus"][key] = gpu
    data["instances"][instance_type] = instance
    return data


def test_a_new_sxm_gpu_is_a_data_change_and_plans_on_an_sxm_kins_efficiencies():
    catalogue = catalogue_from_data(with_gpu("b200", B200, "p6-b200.48xlarge", P6))
    env = EnvironmentSpec.model_validate({"name": "prod", "region": "us-east-1", "instanceFamilies": ["p6-b200"]})
    plan = compile_fleet(parse_fleet_text(CHAT), env, catalogue)
    (chat,) = plan.models
    assert chat.instance_type == "p6-b200.48xlarge"
    source = chat.estimates.source
    assert "NVIDIA B200" in source and "sxm" in source and ("h200" in source or "h100" in source), source
    assert "l40s" not in source


@pytest.mark.parametrize("gpu, kin", [
    (GpuType(key="b200", name="NVIDIA B200", memory_gib=178.0, fp16_tflops=2250, memory_bandwidth_gbs=8000,
             compute_capability=10.0, form_factor="sxm"), {"h100", "h200"}),
    (GpuType(key="a100", name="NVIDIA A100 40GB", memory_gib=39.4, fp16_tflops=312, memory_bandwidth_gbs=1555,
             compute_capability=8.0, form_factor="sxm"), {"a100-80"}),
    (GpuType(key="rtx-pro", name="NVIDIA RTX PRO 6000", memory_gib=95.0, fp16_tflops=500, memory_bandwidth_gbs=1600,
             compute_capability=12.0, form_factor="pcie"), {"l40s"}),
    (GpuType(key="t4", name="NVIDIA T4", memory_gib=15.0, fp16_tflops=65, memory_bandwidth_gbs=320,
             compute_capability=7.5, form_factor="pcie"), {"l40s"}),
])
def test_the_kin_shares_the_form_factor(gpu, kin):
    table = load_performance_table()
    chosen, why = calibrated_kin(table, gpu)
    assert chosen.key in kin and table.form_factors[chosen.key] == gpu.form_factor, why
    perf = gpu_performance(table, gpu, True, gpu.memory_bandwidth_gbs)
    assert perf.tflops == gpu.fp16_tflops
    assert chosen.key in perf.source or chosen.source in perf.source  # a datasheet roofline names its kin; the
    # same silicon with another memory (A100 40 GB) keeps its measured source


def test_a_form_factor_with_no_calibrated_gpu_borrows_across_and_says_so():
    shipped = load_performance_table()
    pcie_only = PerformanceTable({"l40s": shipped.gpus["l40s"]}, {}, shipped.fitted, shipped.source, {"l40s": "pcie"})
    gpu = GpuType(key="b200", name="NVIDIA B200", memory_gib=178.0, fp16_tflops=2250, memory_bandwidth_gbs=8000,
                  compute_capability=10.0, form_factor="sxm")
    perf = gpu_performance(pcie_only, gpu, True, 8000)
    assert "NO calibrated sxm GPU" in perf.source and "pcie l40s" in perf.source, perf.source


def test_every_shipped_gpu_declares_its_form_factor_and_every_calibrated_one_is_in_the_registry():
    catalogue = load_instance_catalogue()
    table = load_performance_table()
    assert {g.form_factor for g in catalogue.gpus.values()} == {"sxm", "pcie"}
    for key in table.gpus:
        assert table.form_factors[key] == catalogue.gpus[key].form_factor, key
    for instance in catalogue.instances.values():
        assert gpu_for(instance.gpu).source  # every GPU of the table gets constants that say where they come from


def test_a_gpu_without_a_form_factor_is_a_clean_error(tmp_path):
    data = with_gpu("b200", {k: v for k, v in B200.items() if k != "form_factor"}, "p6-b200.48xlarge", P6)
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as caught:
        load_instance_catalogue(str(path))
    (issue,) = caught.value.issues
    assert issue.path == "gpus.b200.form_factor" and issue.file == str(path)


@pytest.mark.parametrize("profile", ["{rps_per_instance: 100, compute_ms: 5, measured_on: b200}",
                                     "{rps_per_instance: 100, compute_ms: 5, measured_on: a10G}"])
def test_measured_on_names_a_gpu_of_the_table_in_use(profile):
    text = textwrap.dedent(f"""\
        models:
          - name: scorer
            type: tabular
            framework: onnx
            artifact: s3://acme/scorer
            size: {{params: 10M, dtype: fp32}}
            inputs: [{{name: x, dtype: fp32, dims: [16]}}]
            outputs: [{{name: y, dtype: fp32, dims: [1]}}]
            sla: {{p99_latency_ms: 100, peak_rps: 10}}
            profile: {profile}
        """)
    env = EnvironmentSpec(name="prod", region="us-east-1")
    if "a10G" in profile:  # not a key's shape: refused where it is written
        with pytest.raises(SpecError):
            parse_fleet_text(text)
        return
    with pytest.raises(CompileError) as caught:
        compile_fleet(parse_fleet_text(text), env, load_instance_catalogue())
    (issue,) = caught.value.issues
    assert issue.path == "models[0].profile.measured_on" and "'b200'" in issue.message and "l40s" in issue.message
    catalogue = catalogue_from_data(with_gpu("b200", B200, "p6-b200.48xlarge", P6))
    assert compile_fleet(parse_fleet_text(text), env, catalogue).models  # once the table has it, it compiles
