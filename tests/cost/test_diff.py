"""`cost --base`: the diff of a known change (a 70B model added) against a git ref, byte for byte; changes
to stacks and to the price table read at the base ref and named as causes; stacks added, removed and
failing; and the reasons the diff gives for changed models. Golden files are rewritten only with
MODELFLEET_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from modelfleet.cli import main
from modelfleet.cost.diff import StackSides, Step, compute_environment_diff
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
    shutil.copytree(ROOT / "stacks", root / "stacks", dirs_exist_ok=True)
    shutil.copytree(ROOT / "samples", root / "samples")  # warmup samples models.yaml names
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
    # The new 70B (1,500-token prompts, p99 TTFT 2.5 s, TPOT 60 ms) joins the other 70B on p4d.24xlarge: its 16
    # sequences fit 2 replicas of tp=8 (the availability floor): 2 x (21.957642 x 730 + 16.00) = +32,090.16;
    # max 3 replicas and a rollout surge: 6 -> 10 nodes. dev: 1 replica on spot g6e.24xlarge (no p4d there; its
    # dearest zone, 5.7615, is below g6e.12xlarge's 6.015 for the same 4 L40S) at the table's dated spot price:
    # 1 x (5.7615 x 730 + 16.00) = +4,221.895 (4,221.89 in floating point). dev's base, compiled without a lock
    # here, is the optimum (the 8B on g6e.2xlarge, the 70B on g6e.24xlarge): 5,723.25. staging as prod: +32,090.16.
    # In all: 68,402.21.
    assert "| prod (on-demand) | 216,207.53 | 248,297.68 | **+32,090.16 (+14.8%)** |" in comment
    assert "| dev (spot, dated table) | 5,723.25 | 9,945.15 | **+4,221.89 (+73.8%)** |" in comment
    assert "| staging (on-demand) | 135,817.13 | 167,907.28 | **+32,090.16 (+23.6%)** |" in comment
    assert "### modelfleet cost: +68,402.21 USD/month across 3 environment(s)" in comment
    assert ("gpu-g6e-24xlarge-spot (g6e.24xlarge, 5.7615 USD/h + EBS 16.00 USD/month per node): nodes 1-1-2 -> 2-2-4 "
            "(min-desired-max) = +4,221.89 at desired") in comment
    assert "assumed spot prices" not in comment  # dated in the table, not assumed
    assert ("gpu-p4d-24xlarge-od (p4d.24xlarge, 21.957642 USD/h + EBS 16.00 USD/month per node): nodes 2-3-6 -> 4-5-10 "
            "(min-desired-max) = +32,090.16 at desired") in comment
    assert "`llama-3-3-70b-instruct`" not in comment and "replaces the group's running nodes" not in comment
    # the cost per million tokens divides by the 2 replicas' predicted output, and the speed is shown beside it
    estimates = Project(root=str(repo)).plan("prod").model("llama-3-1-70b-support").estimates
    served = 2 * estimates.output_tokens_per_s_per_replica
    assert (f"USD {32_090.15732 / 730 / (served * 3600) * 1e6:.3g} per million tokens at {served:,.0f} tok/s "
            f"predicted | TTFT p99 {estimates.ttft_p99_ms:,.0f} ms, TPOT {estimates.tpot_ms:.1f} ms at "
            f"{estimates.sequences_per_replica} seq") in comment
    # dev runs one replica: priced at what it serves, and flagged
    assert "misses the SLA: 1 replica(s) at peak, p99 TTFT" in comment.split("#### dev")[1].split("#### prod")[0]
    lines = comment.splitlines()
    assert lines[0] == "<!-- modelfleet-cost -->" and lines[5].startswith("| environment | before | after |")


def test_a_base_that_is_neither_file_nor_ref_is_one_line(tmp_path, capsys):
    repo = pull_request(tmp_path)
    assert main(["--project", str(repo), "cost", "--base", "origin/nope"]) == 2
    err = capsys.readouterr().err
    assert "--base: 'origin/nope' is not a file or directory, and `git show origin/nope:./models.yaml` failed" in err


def test_a_base_file_works_like_a_ref(tmp_path, capsys):
    repo = pull_request(tmp_path)
    base = tmp_path / "base.yaml"
    base.write_text(git(repo, "show", "main:models.yaml"))
    assert main(["--project", str(repo), "cost", "--base", str(base), "--stack", "prod"]) == 0
    out = capsys.readouterr().out
    assert "prod (on-demand): 216,207.53 -> 248,297.68 (+32,090.16); min/max change +32,090.16 / +64,180.31" in out
    assert "base stacks: the working tree's (a base file is only models.yaml)" in out


# ---------------------------------------------------------------------------------------------- stacks and prices
def _base_and_head(tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of the example project (models.yaml and stacks/) for `cost --base DIR`: base, then head."""
    base = tmp_path / "base"
    base.mkdir()
    shutil.copy(ROOT / "models.yaml", base / "models.yaml")
    shutil.copytree(ROOT / "stacks", base / "stacks")
    shutil.copytree(ROOT / "samples", base / "samples")  # warmup samples models.yaml names
    head = tmp_path / "head"
    shutil.copytree(base, head)
    return base, head


def test_a_base_directory_brings_its_own_stacks(tmp_path, capsys):
    base, head = _base_and_head(tmp_path)
    dev = head / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("  modelfleet:replicas:\n    singleReplica: true\n",
                                           "  modelfleet:replicas:\n    singleReplica: true\n    minimum: 0\n"))
    assert main(["--project", str(head), "cost", "--base", str(base), "--stack", "dev"]) == 0
    out = capsys.readouterr().out
    # scale to zero lowers the minimum only: min 5,723.25 -> 0.00, desired unchanged (no lock here: the optimum)
    assert "dev (spot, dated table): 5,723.25 -> 5,723.25 (0.00); min/max change -5,723.25 / 0.00" in out
    assert "cause stack settings: no cost change (modelfleet:replicas.minimum: unset -> 0)" in out
    assert f"base stacks: {base}/stacks" in out


def test_a_stack_switched_to_spot_is_priced_at_the_base_setting(tmp_path, capsys):
    """The review's case: the PR adds the 70B model and moves prod to spot. Before the fix the base was priced
    with the PR's stack file, so the switch was invisible."""
    repo = pull_request(tmp_path)
    prod = repo / "stacks" / "Pulumi.prod.yaml"
    prod.write_text(prod.read_text().replace("modelfleet:capacityType: on-demand", "modelfleet:capacityType: spot"))
    assert main(["--project", str(repo), "cost", "--base", "main", "--stack", "prod", "--format", "markdown"]) == 0
    comment = capsys.readouterr().out
    # On spot every availability floor stays on on-demand nodes (plan/capacity/provisioning.py); only what scales
    # above it rides on spot at the table's dated price. p4d: the two 70Bs' floors (2 replicas of tp=8, a node
    # each, and 2 of the new one's tp=4, one node together) on-demand, the other 3 of the 6 nodes on spot:
    # 3 x (21.957642 x 730 + 16) + 3 x (8.1915 x 730 + 16) = 48,135.24 + 17,987.39 = 66,122.62. At p4d's spot
    # price the new 70B runs 5 replicas of tp=4. The Triton servers stay on g5.xlarge: on p4d's idle GPUs their
    # floor of 2 replicas would need a 4th on-demand p4d node (the LLMs' floors fill 3), and the packing ranks
    # it so (plan/triton/packing/gpu.py); before, it ranked every node at spot, moved them there, and the
    # preview charged that node on-demand: 241,482.11 in all, against 233,226.20 now.
    assert "| prod (spot, dated table) | 216,207.53 | 233,226.20 | **+17,018.68 (+7.9%)** |" in comment
    assert ("node group gpu-p4d-24xlarge-spot (p4d.24xlarge, 8.1915 USD/h + EBS 16.00 USD/month per node): nodes "
            "0-0-0 -> 3-6-11 (min-desired-max); 3 on-demand (the floors' base) = +66,122.62 at desired") in comment
    assert ("node group gpu-g5-xlarge-spot (g5.xlarge, 0.4507 USD/h + EBS 16.00 USD/month per node): nodes "
            "0-0-0 -> 2-2-4 (min-desired-max); 2 on-demand (the floors' base) = +1,500.76 at desired") in comment
    # the switch alone saves only what rides above the floors: the 3rd replica of llama-3-3-70b-instruct
    # (21.957642 - 8.1915) x 730 = 10,049.28 and the 8B's 2 replicas above its floor of 2, 2 x (1.861 - 1.1975) x 730
    # = 968.71: 11,017.99
    assert "- stack settings: -11,017.99 at desired (modelfleet:capacityType: on-demand -> spot)" in comment
    assert "- models.yaml: +28,036.67 at desired" in comment
    assert "| USD per node-hour 21.957642 (on-demand) -> 8.1915 (spot (dated table)) —" in comment


def test_a_price_table_change_is_its_own_cause(tmp_path, capsys):
    """A table tracked in the repository (passed with --prices) is read at the base ref too."""
    repo = tmp_path / "repo"
    repo.mkdir()
    table = (ROOT / "modelfleet" / "data" / "instances.yaml").read_text()
    assert "usd_per_hour: {us-east-1: 21.957642}" in table
    (repo / "prices.yaml").write_text(table)
    pull_request(repo, change="")
    argv = ["--project", str(repo), "cost", "--base", "main", "--prices", str(repo / "prices.yaml"), "--stack", "prod"]

    (repo / "prices.yaml").write_text(table.replace("{us-east-1: 21.957642}", "{us-east-1: 22.5}"))
    assert main(argv) == 0
    out = capsys.readouterr().out
    # the 70B's 3 nodes x (22.5 - 21.957642) USD/h x 730 h = 1,187.76; 213,458.4688 + 1,187.7639 = 214,646.23
    assert "prod (on-demand): 216,207.53 -> 217,395.29 (+1,187.76)" in out
    assert "  cause price table: +1,187.76 at desired (p4d.24xlarge on-demand us-east-1: 21.957642 -> 22.5 USD/h)" in out
    assert "base price table: main:prices.yaml" in out
    assert "- USD per node-hour 21.957642 (on-demand) -> 22.5 (on-demand)" in out
    assert ("gpu-p4d-24xlarge-od (p4d.24xlarge, 21.957642 -> 22.5 USD/h + EBS 16.00 USD/month per node): nodes 2-3-6 "
            "-> 2-3-6 (min-desired-max) = +1,187.76 at desired") in out

    # dearer still, and the compiler moves the 70B to p5.48xlarge (tp=2; its replicas on 2 nodes, one per zone):
    # 2 x (55.04 x 730 + 16) = 80,390.40 a month against 3 x (40.0 x 730 + 16) = 87,648.00 on p4d.24xlarge; the
    # move is the price table's doing: 80,390.40 - 48,135.24 = +32,255.16
    (repo / "prices.yaml").write_text(table.replace("{us-east-1: 21.957642}", "{us-east-1: 40.0}"))
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "  cause price table: +32,255.16 at desired (p4d.24xlarge on-demand us-east-1: 21.957642 -> 40.0 USD/h)" in out
    assert "- instance type p4d.24xlarge -> p5.48xlarge" in out

    # gp3 storage dearer: 0.08 -> 0.1 USD per GiB-month; prod's 15 nodes at 200 GiB at desired:
    # 15 x 200 x 0.02 = +60.00
    old = "usd_per_gib_month: {us-east-1: 0.08}"
    assert old in table
    (repo / "prices.yaml").write_text(table.replace(old, "usd_per_gib_month: {us-east-1: 0.1}"))
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "prod (on-demand): 216,207.53 -> 216,267.53 (+60.00)" in out
    assert "  cause price table: +60.00 at desired (EBS gp3 us-east-1: 0.08 -> 0.1 USD per GiB-month)" in out
    assert ("- each node's volume 200 GiB gp3 at 3000 IOPS, 125 MiB/s (16.00 USD/month) -> 200 GiB gp3 at 3000 "
            "IOPS, 125 MiB/s (20.00 USD/month)") in out


def test_stacks_added_and_removed_are_shown_as_such(tmp_path, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "stacks").mkdir()
    shutil.copy(ROOT / "stacks" / "Pulumi.staging.yaml", repo / "stacks" / "Pulumi.qa.yaml")
    pull_request(repo, change="")
    git(repo, "mv", "stacks/Pulumi.qa.yaml", "stacks/Pulumi.perf.yaml")
    assert main(["--project", str(repo), "cost", "--base", "main", "--format", "markdown"]) == 0
    comment = capsys.readouterr().out
    # staging's settings under new names; models.yaml's `staging:` patches do not apply to them, so they
    # cost what prod does at prod's sizes: 216,207.53 (a budget of 150,000 in warn mode)
    assert "| perf (new stack; on-demand) | — | 216,207.53 | **+216,207.53** | ⚠️ 144% of 150,000.00" in comment
    assert "| qa (stack removed; on-demand) | 216,207.53 | — | **-216,207.53 (-100.0%)** | - |" in comment
    assert "| prod (on-demand) | 216,207.53 | 216,207.53 | no change |" in comment
    assert comment.splitlines()[1] == ("### modelfleet cost: 0.00 USD/month across 5 environment(s) — ⚠️ over budget "
                                       "(warn only): perf")  # perf and qa cancel out
    assert "| `llama-3-1-405b-instruct` (added) | +160,780.80 | 160,780.80 | USD 176 per million tokens at 347 tok/s " \
           "predicted | TTFT p99 " in comment


# ---------------------------------------------------------------------------------------------- failures
BIG_COPY = """
  - name: big-405b-copy
    type: llm
    artifact: meta-llama/Llama-3.1-405B-Instruct
    revision: 0123456789abcdef0123456789abcdef01234567
    size: {dtype: bf16}
    architecture: llama-3.1-405b
    sla: {max_context_tokens: 8192, avg_input_tokens: 2000, avg_output_tokens: 1000, peak_concurrent_sequences: 16,
          p99_ttft_ms: 4000, p99_tpot_ms: 80}
"""


def test_a_stack_that_does_not_compile_is_a_row_with_its_errors(tmp_path, capsys):
    """dev allows no p5: the copy cannot be placed there. The other stacks keep their figures, the report is
    written, the exit code says it failed, and every error names its stack."""
    repo = pull_request(tmp_path, change=BIG_COPY)
    assert main(["--project", str(repo), "cost", "--base", "main", "--format", "markdown"]) == 2
    captured = capsys.readouterr()
    comment = captured.out
    assert "| dev (spot, dated table) | 5,723.25 | ❌ does not compile | unknown | - |" in comment
    assert "— ❌ does not compile: dev" in comment.splitlines()[1]
    line = next(i for i, row in enumerate((repo / "models.yaml").read_text().splitlines(), 1)
                if "name: big-405b-copy" in row)
    assert f"- ❌ dev: {repo}/models.yaml:{line}:5: models[8]: big-405b-copy: " in comment
    assert "| prod (on-demand) | 216,207.53 | 376,988.33 | **+160,780.80 (+74.4%)** |" in comment  # 4 x 40,195.20
    assert f"dev: {repo}/models.yaml:{line}:5: models[8]: big-405b-copy: " in captured.err
    assert "cost: 1 stack(s) do not compile: dev; the report above shows them" in captured.err
    assert "nothing was written" not in captured.err


def test_an_invalid_models_yaml_still_gets_a_report(tmp_path, capsys):
    repo = pull_request(tmp_path, change="  - name: Not_A_Dns_Label\n")
    assert main(["--project", str(repo), "cost", "--base", "main", "--format", "text"]) == 2
    out = capsys.readouterr().out
    assert out.count("DOES NOT COMPILE") == 3 and "models[8].name: 'Not_A_Dns_Label' is not in the expected format" in out


# ---------------------------------------------------------------------------------------------- reasons
def _side(project: Project, stack: str):
    return project.costed(stack)


def _changed(tmp_path: Path, old: str, new: str, stack: str = "prod"):
    root = tmp_path / "head"
    root.mkdir()
    shutil.copytree(ROOT / "stacks", root / "stacks")
    shutil.copytree(ROOT / "samples", root / "samples")  # warmup samples models.yaml names
    text = (ROOT / "models.yaml").read_text()
    assert old in text
    (root / "models.yaml").write_text(text.replace(old, new, 1))
    base, head = _side(Project(root=str(ROOT)), stack), _side(Project(root=str(root)), stack)
    return compute_environment_diff(stack, StackSides(base, head, (Step("models.yaml", (), head),)))


def test_replicas_change_is_explained_by_the_spec_field(tmp_path):
    diff = _changed(tmp_path, "peak_requests_per_s: 4 ", "peak_requests_per_s: 6 ")
    (change,) = diff.changes
    assert change.name == "llama-3-1-8b-instruct" and change.status == "changed" and change.edited
    assert change.reasons == ("sla.peak_requests_per_s 4.0 -> 6.0",  # what the PR edited
                              "replicas 2-4-6 -> 2-6-9 (min-desired-max)")  # the compiler's: simulated at 6 req/s
    assert change.delta_usd == pytest.approx(2 * (1.861 * 730 + 16))  # two more g6e.xlarge and their volumes: 2,749.06


def test_instance_type_and_sharding_changes_are_explained(tmp_path):
    old = "    overrides:\n      extra_args:"  # the 8B's
    new = "    overrides:\n      instance_type: g6e.12xlarge\n      tensor_parallel_size: 2\n      extra_args:"
    diff = _changed(tmp_path, old, new)
    changes = {c.name: c for c in diff.changes}
    change = changes.pop("llama-3-1-8b-instruct")
    assert change.reasons[:2] == ("overrides.instance_type unset -> g6e.12xlarge",
                                  "overrides.tensor_parallel_size unset -> 2")
    assert "instance type g6e.xlarge -> g6e.12xlarge" in change.reasons
    assert "tensor parallel 1 -> 2" in change.reasons
    assert any(r.startswith("max_num_seqs ") for r in change.reasons)  # two GPUs decode faster: more sequences
    assert "replicas 2-4-6 -> 2-3-5 (min-desired-max)" in change.reasons  # and fewer replicas hold the p99 TPOT
    assert any("gpu-g6e-xlarge-od (g6e.xlarge, 1.861 USD/h + EBS 16.00 USD/month per node): nodes 2-4-7 -> 0-0-0" in n
               for n in diff.node_groups)
    # its 2 replicas of 2 GPUs leave half of each 4-GPU node idle: the Triton server moves there, free, and
    # fraud-scorer leaves its CPU server for it too (the idle GPUs cost nothing more than they do)
    assert {c.reasons[0] for c in changes.values()} == {"instance type g5.xlarge -> g6e.12xlarge",
                                                        "instance type c7i.xlarge -> g6e.12xlarge"}


def test_removed_model_gives_back_its_cost(tmp_path):
    text = (ROOT / "models.yaml").read_text()
    start = text.index("  - name: llama-3-1-405b-instruct")
    diff = _changed(tmp_path, text[start:], "")
    (change,) = diff.changes
    # 4 p5.48xlarge nodes, each with its 200 GiB root volume (the checkpoint is on the instance store: 16.00)
    assert change.status == "removed" and change.delta_usd == pytest.approx(-4 * (55.04 * 730 + 16))  # -160,780.80
    assert diff.delta.desired == pytest.approx(-160_780.80)


def test_triton_neighbours_are_named_when_a_server_changes(tmp_path):
    old = "      peak_rps: 100               # direct callers; the image-classification pipeline adds its own 200\n"
    diff = _changed(tmp_path, old + "      availability: 99.9\n",
                    "      peak_rps: 1300\n      availability: 99.9\n")  # resnet50 needs GPUs of its own
    names = {c.name: c for c in diff.changes}
    assert names["resnet50-classifier"].reasons[0] == "sla.peak_rps 100.0 -> 1300.0"
    assert "text-embedder" in names and not names["text-embedder"].edited
    # the classifier leaves with its pipeline partner, the preprocessor (a pipeline's steps share a server); the
    # GPU left to the embedder then has room for fraud-scorer for free, so the compiler moves it back from its CPU
    # nodes (plan/triton/devices.py)
    assert ("now shares its GPU with fraud-scorer; no longer with image-preprocessor, resnet50-classifier"
            in names["text-embedder"].reasons)
    assert names["fraud-scorer"].layout.startswith("triton-g5-xlarge")


# ---------------------------------------------------------------------------------------------- a created cluster
def _creating_prod(root: Path, system_type: str | None = None) -> None:
    prod = root / "stacks" / "Pulumi.prod.yaml"
    old = "    name: ml-serving-prod      # the existing EKS cluster these node groups and workloads join\n"
    assert old in prod.read_text()
    system = f"    systemInstanceType: {system_type}\n" if system_type else ""
    prod.write_text(prod.read_text().replace(old, old + "    create: true\n    publicAccessCidrs: []\n" + system))


def test_creating_the_cluster_shows_its_system_nodes_and_control_plane(tmp_path, capsys):
    base, head = _base_and_head(tmp_path)
    _creating_prod(head)
    assert main(["--project", str(head), "cost", "--base", str(base), "--stack", "prod"]) == 0
    out = capsys.readouterr().out
    # 0.10 x 730 = 73.00 for the control plane; 2 x (0.1008 x 730 + 50 GiB x 0.08) = 155.168 for the system
    # nodes (4 at max: 310.336)
    assert "prod (on-demand): 216,207.53 -> 216,435.69 (+228.17); min/max change +228.17 / +383.34" in out
    assert "cause stack settings: +228.17 at desired (modelfleet:cluster.create: unset -> true; " in out
    assert ("  cluster: system nodes, on-demand (m7i.large, 0.1008 USD/h + EBS 4.00 USD/month per node): nodes 0-0-0 "
            "-> 2-2-4 (min-desired-max) = +155.17 at desired\n") in out
    assert "  cluster: EKS control plane: not created -> 73.00 a month (+73.00)\n" in out
    _creating_prod(base)  # both sides create it; the head moves the system nodes to m7i.xlarge
    prod = head / "stacks" / "Pulumi.prod.yaml"
    prod.write_text(prod.read_text().replace("create: true\n", "create: true\n    systemInstanceType: m7i.xlarge\n"))
    assert main(["--project", str(head), "cost", "--base", str(base), "--stack", "prod", "--format", "markdown"]) == 0
    comment = capsys.readouterr().out
    # 2 x (0.2016 - 0.1008) x 730 = +147.17
    assert ("- cluster: system nodes, on-demand (m7i.large -> m7i.xlarge, 0.1008 -> 0.2016 USD/h + EBS 4.00 USD/month "
            "per node): nodes 2-2-4 -> 2-2-4 (min-desired-max) = +147.17 at desired") in comment
    assert "EKS control plane" not in comment.split("#### prod")[1]  # it did not change


def test_a_system_type_price_change_is_named_by_the_price_table_cause(catalogue):
    import dataclasses
    from types import MappingProxyType

    from modelfleet.commands.cost_sources import describe_catalogue_changes
    m7i = dataclasses.replace(catalogue.system_instances["m7i.large"], usd_per_hour=MappingProxyType({"us-east-1": 0.11}))
    after = dataclasses.replace(catalogue, system_instances=MappingProxyType({**catalogue.system_instances,
                                                                              "m7i.large": m7i}))
    used = {"g5.xlarge", "m7i.large"}  # a stack creating its cluster uses its system type
    assert describe_catalogue_changes(catalogue, after, used, {"us-east-1"}) == (
        "m7i.large on-demand us-east-1: 0.1008 -> 0.11 USD/h",)
    assert describe_catalogue_changes(catalogue, after, {"g5.xlarge"}, {"us-east-1"}) == ()  # a joining stack


# ---------------------------------------------------------------------------------------------- compiler changes
def test_a_diff_says_when_the_compiler_itself_changed_since_the_base(tmp_path):
    """Both sides are compiled by this branch's code, so a change to the compiler is not in the figures: the
    diff says so before them, naming the files (the price data, a side of its own, excepted)."""
    import os

    import modelfleet
    from modelfleet.commands.cost import run_git
    from modelfleet.commands.cost_sources import compiler_caveats, read_base, read_head
    from modelfleet.cost.diff import compute_fleet_diff
    from modelfleet.cost.report import render_diff_markdown, render_diff_text

    repo = pull_request(tmp_path)
    package = os.path.dirname(os.path.abspath(modelfleet.__file__))
    calls = []

    def fake_git(root, *args):  # one repository holds both the project and the running package
        calls.append(args)
        if args[:2] == ("rev-parse", "--show-toplevel"):
            return os.path.dirname(package) + "\n"
        if args[:2] == ("diff", "--name-only"):
            return "modelfleet/plan/triton/policy.py\nmodelfleet/data/instances.yaml\nmodelfleet/plan/triton/packing/gpu.py\n"
        return run_git(str(repo), *args)

    project = Project(root=str(repo))
    base = read_base(project, "main", read_head(project), fake_git)
    assert ("diff", "--name-only", "main", "--", "modelfleet") in calls
    assert base.compiler_changes == ("modelfleet/plan/triton/packing/gpu.py", "modelfleet/plan/triton/policy.py")
    (caveat,) = compiler_caveats(base)
    assert caveat.startswith("the compiler itself differs from main (2 file(s): modelfleet/plan/triton/packing/gpu.py, "
                             "modelfleet/plan/triton/policy.py); both sides are compiled by this branch's code")
    diff = compute_fleet_diff({}, base_label="main", head_label="models.yaml", caveats=(caveat,))
    assert f"> ⚠️ {caveat}" in render_diff_markdown(diff)
    assert f"  WARNING: {caveat}" in render_diff_text(diff)


def test_a_package_outside_the_projects_repository_has_no_compiler_caveat(tmp_path):
    from modelfleet.commands.cost_sources import read_base, read_head

    repo = pull_request(tmp_path)
    project = Project(root=str(repo))
    # the running package is not in the temporary repository (an installed release, or another checkout)
    assert read_base(project, "main", read_head(project), lambda root, *a: git(Path(root), *a)
                     if Path(root) == repo else (None if a[0] == "rev-parse" else "")).compiler_changes == ()


UNMEASURED_MODEL = """  - name: unmeasured-ranker
    type: tabular
    framework: onnx
    artifact: s3://acme-ml-models/triton/unmeasured-ranker
    version: 1
    size: {params: 10M, dtype: fp32}
    inputs: [{name: x, dtype: fp32, dims: [16]}]
    outputs: [{name: y, dtype: fp32, dims: [1]}]
    sla: {p99_latency_ms: 100, peak_rps: 50}
"""


def test_an_added_unmeasured_model_is_marked_once(tmp_path, capsys):
    """The diff marks a model without a profile as unmeasured, once (it read "UNMEASURED: UNMEASURED: ...")."""
    repo = pull_request(tmp_path, UNMEASURED_MODEL)
    assert main(["--project", str(repo), "cost", "--base", "main", "--stack", "prod"]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines() if "UNMEASURED" in line]
    assert lines and all(line.count("UNMEASURED") == 1 for line in lines), lines
    assert any(line.startswith("UNMEASURED: a full batch of") for line in lines), lines
