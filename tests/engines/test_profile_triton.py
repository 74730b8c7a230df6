"""``modelfleet profile`` against the REAL tritonserver: the figures per batch size written into models.yaml
(only the profile's lines change), and the next ``plan`` using them.

Two ways in, as a user runs them (the command is a subprocess on a copy of the example project):

* ``--url``: a running endpoint. Here it is the local CPU tritonserver standing in for a deployed GPU one,
  with ``--measured-on a10g`` as a user would say where their endpoint runs: what is proven is the loop (the
  figures measured at a URL are written under that GPU and the next plan scales and uses them), not an A10G's
  speed. The endpoint runs the profiling adaptations (no window, cache or queue timeout), so that a slow
  moment on this shared machine is measured rather than rejected.
* no ``--url``: the command starts the local server itself; its figures are this CPU's (``measured_on:
  cpu``), which the plan reports but does not use for an ONNX model's GPU placement.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.engines.conftest import require_tritonserver

require_tritonserver()

from modelfleet.commands.profile_triton import for_profiling  # noqa: E402
from modelfleet.plan.triton.speed import speed_ratio  # noqa: E402
from modelfleet.project import Project  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.engines.conftest import make_artifact_root, served  # noqa: E402

pytestmark = pytest.mark.engine

MODEL = "fraud-scorer"
DATE = "2026-01-02"


def copy_project(target: Path, without_profile: str | None = None) -> Path:
    target.mkdir()
    text = (ROOT / "models.yaml").read_text()
    if without_profile:  # drop the model's profile block (its 4 lines after "profile:")
        start = text.index("    profile:", text.index(f"- name: {without_profile}"))
        end = text.index("\n\n", start)
        text = text[:start] + text[end + 1:]
    (target / "models.yaml").write_text(text)
    shutil.copytree(ROOT / "stacks", target / "stacks")
    shutil.copytree(ROOT / "samples", target / "samples")  # warmup samples models.yaml names
    return target


def profile(project: Path, *args: str) -> tuple[str, float]:
    command = [sys.executable, "-m", "modelfleet", "--project", str(project), "profile", "--stack", "dev",
               "--model", MODEL, "--seconds", "0.5", "--date", DATE, *args]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, time.monotonic() - started


def changed_lines(before: str, after: str) -> list[str]:
    """Removed lines ("-...") then added ones ("+..."), per changed group; autojunk off (see
    tests/test_profile_yaml.py), so a recurring unchanged line is never reported as changed."""
    a, b = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [line for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"
            for line in [f"-{x}" for x in a[i1:i2]] + [f"+{x}" for x in b[j1:j2]]]


def test_profile_at_a_url_is_written_under_its_gpu_and_the_next_plan_uses_it(dev_plan, tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project")
    before = (project / "models.yaml").read_text()
    root = make_artifact_root(tmp_path / "artifacts", (MODEL,), preprocessor=False)
    with served(for_profiling(dev_plan), root, tmp_path / "work", only=(MODEL,)) as (server, _):
        output, seconds = profile(project, "--url", server.http_url, "--measured-on", "a10g")
    print(f"profile --url took {seconds:.0f} s:\n{output}")
    assert f"wrote the profile of {MODEL}" in output
    lines = changed_lines(before, (project / "models.yaml").read_text())
    # only the measured figures of fraud-scorer change; measured_on stays a10g; the date and table are added
    assert [line.split(":")[0] for line in lines if line[0] == "-"] == ["-      rps_per_instance", "-      compute_ms"]
    assert [line.split(":")[0] for line in lines if line[0] == "+"] == [
        "+      rps_per_instance", "+      compute_ms", "+      measured_at", "+      batches",
        *["+        - {batch_size"] * 8]

    spec = Project(str(project)).fleet().model(MODEL).profile
    assert spec.measured_on == "a10g" and spec.measured_at == DATE
    assert [b.batch_size for b in spec.batches] == [1, 2, 4, 8, 16, 32, 64, 128]
    catalogue = Project(str(project)).catalogue()
    planned = Project(str(project)).plan("dev").model(MODEL)  # wherever this CPU's figures now place it
    gpu = catalogue.instances[planned.instance_type].gpu
    ratio = speed_ratio(catalogue.instances["g5.xlarge"].gpu, gpu)
    assert planned.measured and planned.speed_basis.startswith(f"measured on NVIDIA A10G, {DATE}")
    chosen = next(b for b in spec.batches if b.batch_size == planned.max_batch_size)
    assert planned.compute_ms == pytest.approx(round(chosen.p99_ms / ratio, 3))  # the table, scaled to its GPU
    assert planned.rps_per_instance == pytest.approx(chosen.throughput_rps * ratio, abs=0.01)
    # the largest measured batch within 0.4 of the 20 ms p99 (or the smallest, when none is)
    within = [b.batch_size for b in spec.batches if b.p99_ms / ratio <= 0.4 * 20]
    assert chosen.batch_size == (within[-1] if within else 1)


def test_profile_of_the_local_server_is_this_cpus_and_the_plan_says_so(tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project", without_profile=MODEL)
    assert not Project(str(project)).fleet().model(MODEL).profile.measured
    root = make_artifact_root(tmp_path / "artifacts", (MODEL,), preprocessor=False)
    output, seconds = profile(project, "--model-dir-root", str(root), "--workdir", str(tmp_path / "work"))
    print(f"profile (local) took {seconds:.0f} s:\n{output}")
    assert "local tritonserver (CPU)" in output and "batching window 0" in output

    spec = Project(str(project)).fleet().model(MODEL).profile
    # unmeasured, a tabular model gets the type's default batch of 256: every power of two up to it is measured
    assert spec.measured_on == "cpu" and spec.measured_at == DATE and len(spec.batches) == 9
    assert spec.compute_ms == spec.batches[-1].p99_ms and spec.rps_per_instance == spec.batches[-1].throughput_rps
    planned = Project(str(project)).plan("dev").model(MODEL)
    assert not planned.measured  # an ONNX model's GPU plan does not rest on a CPU
    assert planned.speed_basis.startswith(
        "UNMEASURED (its profile was measured on a CPU, which says nothing about a GPU)")
