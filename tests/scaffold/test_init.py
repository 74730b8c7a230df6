"""`modelfleet init`: with no terminal it takes the documented defaults and prints them; every question has a
flag and a bad answer is named by its flag; it refuses a non-empty directory and never overwrites a file; and
what it writes works as it is: validate, plan, cost and the offline preview, for every choice of cluster,
backend and region."""

from __future__ import annotations

import argparse
import io

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.cli import main
from modelfleet.commands.init import ask, priced_regions
from modelfleet.scaffold import CHOICES, InitChoices, scaffold_files
from modelfleet.scaffold.choices import default_of
from modelfleet.scaffold.codeowners import fleet_teams
from modelfleet.scaffold.project_files import MAIN
from modelfleet.spec.load import parse_fleet_text
from tests.conftest import ROOT

FILES = (".github/CODEOWNERS", ".github/workflows/deploy.yml", ".github/workflows/models-pr.yml", ".gitignore",
         "Pulumi.yaml", "README.md", "__main__.py", "models.yaml", "requirements.txt", "stacks/Pulumi.dev.yaml",
         "stacks/Pulumi.prod.yaml")


def init(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["init", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_without_a_terminal_init_takes_the_documented_defaults_and_says_so(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # no terminal: CI, a pipe
    code, out, _ = init(capsys, str(tmp_path / "fleet"))
    assert code == 0
    for choice in CHOICES:
        assert f"{choice.field}: {default_of(choice.field)} (default, no terminal to ask; {choice.flag} to choose)" in out
    written = sorted(str(p.relative_to(tmp_path / "fleet")) for p in (tmp_path / "fleet").rglob("*") if p.is_file())
    assert tuple(written) == FILES
    assert (tmp_path / "fleet" / "__main__.py").read_text() == MAIN == (ROOT / "__main__.py").read_text()


def test_init_refuses_a_non_empty_directory_and_never_overwrites_a_file(capsys, tmp_path):
    (tmp_path / "README.md").write_text("ours\n")
    code, out, err = init(capsys, str(tmp_path))
    assert code == 2 and "the directory is not empty" in err and "--force" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]  # nothing written
    code, out, _ = init(capsys, str(tmp_path), "--force")
    assert code == 0 and (tmp_path / "README.md").read_text() == "ours\n"
    assert f"kept  {tmp_path / 'README.md'} (it exists; not overwritten)" in out
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    code, out, _ = init(capsys, str(tmp_path), "--force", "--region", "eu-west-1")  # a second run changes nothing
    assert code == 0 and {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert "wrote" not in out


def test_every_bad_answer_is_named_by_its_flag_and_nothing_is_written(capsys, tmp_path):
    code, _, err = init(capsys, str(tmp_path / "x"), "--region", "mars-north-1", "--backend", "gs://state",
                        "--cluster", "borrow", "--github-org=bad_org")
    assert code == 2 and not (tmp_path / "x").exists()
    lines = err.splitlines()
    for flag in ("--region", "--backend", "--cluster", "--github-org"):
        assert any(line.startswith(f"modelfleet init: {flag}: ") for line in lines), flag
    assert "'gs://state' is neither 'pulumi-cloud' nor an s3://<bucket>[/<prefix>] URL" in err


def test_every_question_has_a_flag_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["init", "--help"])
    out = capsys.readouterr().out
    assert set(InitChoices.model_fields) == {c.field for c in CHOICES}
    for choice in CHOICES:
        assert choice.flag in out


def test_on_a_terminal_each_unanswered_question_is_asked_and_a_bad_answer_asked_again(capsys):
    answers = iter(["eu-central-9x", "eu-central-1", "create", "", "s3://acme-state/fleet", "acme", ""])
    asked: list[str] = []

    def prompt(question: str) -> str:
        asked.append(question)
        return next(answers)

    args = argparse.Namespace(**{c.field: None for c in CHOICES})
    choices = ask(args, interactive=True, prompt=prompt)
    assert choices == InitChoices(region="eu-central-1", cluster="create", backend="s3://acme-state/fleet",
                                  github_org="acme")
    assert len(asked) == 7 and asked[0] == asked[1] and asked[0].endswith("[us-east-1]: ")
    assert "eu-central-9x" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [[], ["--cluster", "create", "--backend", "s3://acme-state"],
                                   ["--region", "eu-west-1"]])
def test_the_written_repository_validates_plans_and_costs(capsys, tmp_path, flags):
    assert init(capsys, str(tmp_path), *flags)[0] == 0
    project = ["--project", str(tmp_path)]
    code, out, err = (main([*project, "validate"]), *capsys.readouterr())
    assert code == 0 and "every stack compiles: dev, prod" in out, err
    for stack in ("dev", "prod"):
        assert main([*project, "plan", "--stack", stack]) == 0
    assert main([*project, "cost"]) == 0
    assert main([*project, "codeowners", "--check", "--org", "my-org"]) == 0


@pytest.mark.slow  # the Pulumi program under mocks: the full tier
def test_the_written_repository_previews_offline(capsys, tmp_path):
    assert init(capsys, str(tmp_path))[0] == 0
    code = main(["--project", str(tmp_path), "preview", "--stack", "prod"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "k8s:Deployment" in out or "Deployment" in out


@given(region=st.sampled_from(["us-east-1", "us-west-2", "eu-west-1", "ap-southeast-2"]),
       cluster=st.sampled_from(["join", "create"]), backend=st.sampled_from(["pulumi-cloud", "s3://a-state/x"]),
       org=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,10}[A-Za-z0-9]", fullmatch=True),
       team=st.from_regex(r"[a-z][a-z0-9-]{0,12}[a-z0-9]", fullmatch=True))
@settings(max_examples=25, deadline=None)
def test_the_files_are_a_pure_function_of_the_choices(region, cluster, backend, org, team):
    choices = InitChoices(region=region, cluster=cluster, backend=backend, github_org=org, platform_team=team)
    files = scaffold_files(choices, "1.2.3", priced_regions=priced_regions())
    assert files == scaffold_files(choices, "1.2.3", priced_regions=priced_regions())  # byte-identical
    for stack in ("dev", "prod"):
        config = yaml.safe_load(files[f"stacks/Pulumi.{stack}.yaml"])["config"]
        assert config["aws:region"] == region and config["modelfleet:cluster"]["name"] == f"ml-serving-{stack}"
        assert config["modelfleet:cluster"].get("create", False) == (cluster == "create")
        assert ("modelfleet:budget" in config) == (region in priced_regions())
    assert ("backend" in yaml.safe_load(files["Pulumi.yaml"])) == (backend != "pulumi-cloud")
    fleet = parse_fleet_text(files["models.yaml"], "models.yaml")
    assert {m.type for m in fleet.models} == {"embedding", "llm"}  # one classic model, one LLM
    teams = fleet_teams(fleet)
    owners = files[".github/CODEOWNERS"]
    assert f"/models.yaml      @{org}/{team} " + " ".join(f"@{org}/{t}" for t in teams) + "\n" in owners
