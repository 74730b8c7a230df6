"""`cost --base`: the diff of a known change (a 70B model added) against a git ref, byte for byte, and the
reasons the diff gives for changed models. Golden files are rewritten only with MODELFLEET_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from modelfleet.cli import main
from modelfleet.cost_diff import compute_environment_diff
from modelfleet.project import Project
from tests.conftest import ROOT, update_golden

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
ADDITION = (HERE / "fixtures" / "add-70b.yaml").read_text()
GIT = ["git", "-c", "user.name=modelfleet-tests", "-c", "user.email=tests@example.invalid", "-c", "commit.gpgsign=false"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def pull_request(root: Path, change: str = ADDITION) -> Path:
    """The example committed on main, then the PR's edit to models.yaml in the working tree."""
    shutil.copy(ROOT / "models.yaml", root / "models.yaml")
    shutil.copytree(ROOT / "stacks", root / "stacks")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "base")
    with open(root / "models.yaml", "a") as handle:
        handle.write(change)
    return root


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if update_golden():
        path.write_text(text)
    assert path.exists(), f"missing golden {name} (MODELFLEET_UPDATE_GOLDEN=1 to write it)"
    assert text == path.read_text(), f"{name} differs from golden (MODELFLEET_UPDATE_GOLDEN=1 to accept)"


@pytest.mark.parametrize("fmt, golden", [("markdown", "add-70b.md"), ("text", "add-70b.txt"),
                                         ("json", "add-70b.json")])
def test_adding_a_70b_model_matches_golden(tmp_path, capsys, fmt, golden):
    repo = pull_request(tmp_path)
    assert main(["--project", str(repo), "cost", "--base", "main", "--format", fmt]) == 0
    check_golden(golden, capsys.readouterr().out)


def test_the_70b_diff_figures_check_by_hand(tmp_path, capsys):
    repo = pull_request(tmp_path)
    assert main(["--project", str(repo), "cost", "--base", "main", "--format", "markdown"]) == 0
    comment = capsys.readouterr().out
    # prod: 16 sequences / 8 per replica = 2 replicas of tp=4 on g6e.12xlarge: 2 x 10.49264 x 730 = 15,319.25
    # dev: 1 replica on spot at 50%: 1 x 5.24632 x 730 = 3,829.81; staging as prod: 15,319.25
    assert "| prod | 197,780.91 | 213,100.17 | **+15,319.25 (+7.7%)** |" in comment
    assert "| dev | 5,085.05 | 8,914.86 | **+3,829.81 (+75.3%)** |" in comment
    assert "| staging | 117,422.51 | 132,741.77 | **+15,319.25 (+13.0%)** |" in comment
    assert "### modelfleet cost: +34,468.32 USD/month across 3 environment(s)" in comment
    assert ("gpu-g6e-12xlarge-od (g6e.12xlarge, 10.49264 USD/h): nodes 2-4-6 -> 4-6-9 (min-desired-max) "
            "= +15,319.25 at desired") in comment
    # 16 sequences x 30 tokens/s = 480 tokens/s on 2 x 10.49264 USD/h
    assert f"USD {2 * 10.49264 / (480 * 3600) * 1e6:.3g} per million tokens" in comment  # 12.1
    lines = comment.splitlines()
    assert lines[0] == "<!-- modelfleet-cost -->" and lines[5].startswith("| environment | before | after |")


def test_a_base_that_is_neither_file_nor_ref_is_one_line(tmp_path, capsys):
    repo = pull_request(tmp_path)
    assert main(["--project", str(repo), "cost", "--base", "origin/nope"]) == 2
    err = capsys.readouterr().err
    assert "--base: 'origin/nope' is not a file, and `git show origin/nope:./models.yaml` failed" in err


def test_a_base_file_works_like_a_ref(tmp_path, capsys):
    repo = pull_request(tmp_path)
    base = tmp_path / "base.yaml"
    base.write_text(git(repo, "show", "main:models.yaml"))
    assert main(["--project", str(repo), "cost", "--base", str(base), "--stack", "prod"]) == 0
    out = capsys.readouterr().out
    assert "prod: 197,780.91 -> 213,100.17 (+15,319.25); min/max change +15,319.25 / +22,978.88" in out


def _side(project: Project, stack: str):
    costed = project.costed(stack)
    return costed.plan, costed.cost


def _changed(tmp_path: Path, old: str, new: str, stack: str = "prod"):
    root = tmp_path / "head"
    root.mkdir()
    shutil.copytree(ROOT / "stacks", root / "stacks")
    text = (ROOT / "models.yaml").read_text()
    assert old in text
    (root / "models.yaml").write_text(text.replace(old, new, 1))
    base = _side(Project(root=str(ROOT)), stack)
    return compute_environment_diff(base, _side(Project(root=str(root)), stack), None, ())


def test_replicas_change_is_explained(tmp_path):
    diff = _changed(tmp_path, "peak_concurrent_sequences: 48", "peak_concurrent_sequences: 72")
    (change,) = diff.changes
    assert change.name == "llama-3-1-8b-instruct" and change.status == "changed"
    assert change.reasons == ("replicas 2-3-5 -> 2-4-6 (min-desired-max)",)  # ceil(72 / 23) = 4
    assert change.delta_usd == pytest.approx(1 * 1.861 * 730)  # one more g6e.xlarge: 1,358.53


def test_instance_type_and_sharding_changes_are_explained(tmp_path):
    old = "    architecture: llama-3.1-8b\n"
    new = old + "    overrides: {instance_type: g6e.12xlarge, tensor_parallel_size: 2}\n"
    diff = _changed(tmp_path, old, new)
    (change,) = diff.changes
    assert change.reasons[0] == "instance type g6e.xlarge -> g6e.12xlarge"
    assert "tensor parallel 1 -> 2" in change.reasons
    assert any(r.startswith("replicas ") for r in change.reasons)
    assert any("gpu-g6e-xlarge-od (g6e.xlarge, 1.861 USD/h): nodes 2-3-5 -> 0-0-0" in n for n in diff.node_groups)


def test_removed_model_gives_back_its_cost(tmp_path):
    text = (ROOT / "models.yaml").read_text()
    start = text.index("  - name: llama-3-1-405b-instruct")
    diff = _changed(tmp_path, text[start:], "")
    (change,) = diff.changes
    assert change.status == "removed" and change.delta_usd == pytest.approx(-4 * 55.04 * 730)  # -160,716.80
    assert diff.delta.desired == pytest.approx(-160_716.80)


def test_triton_neighbours_are_named_when_a_server_changes(tmp_path):
    diff = _changed(tmp_path, "      peak_rps: 300\n      availability: 99.9\n",
                    "      peak_rps: 1500\n      availability: 99.9\n")  # resnet50 needs GPUs of its own
    names = {c.name: c for c in diff.changes}
    assert "resnet50-classifier" in names
    assert any("gpu_share" in r or "shares its GPU" in r or "no longer with" in r or r.startswith("replicas")
               for r in names["resnet50-classifier"].reasons)
    assert "text-embedder" in names and any("no longer with resnet50-classifier" in r
                                            for r in names["text-embedder"].reasons)
