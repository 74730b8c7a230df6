"""Where `render --out` may write: never over something a person made; usual permissions; clean errors."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelfleet.errors import OutputError
from modelfleet.render.outputs import MARKER, write_file, write_tree
from tests.conftest import ROOT

FILES = {"plan.json": b"{}\n", "triton/s/m/config.pbtxt": b'name: "m"\n'}


def _tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """A throwaway project (models.yaml, stacks/, a .git directory) to point `render --out` at."""
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(ROOT / "models.yaml", root / "models.yaml")
    shutil.copytree(ROOT / "stacks", root / "stacks")
    shutil.copytree(ROOT / "samples", root / "samples")  # warmup samples models.yaml names
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root


def render(project: Path, out: str, cwd: Path, stack: str = "dev") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(project), "render", "--stack", stack,
                           "--out", out], capture_output=True, text=True, cwd=cwd, env=env)


@pytest.mark.parametrize("out", [".", "{project}", "{project}/..", "{project}/stacks/..", "/"])
def test_render_refuses_the_project_the_cwd_and_their_ancestors(project_copy: Path, out: str):
    before = _tree(project_copy.parent)
    result = render(project_copy, out.format(project=project_copy), cwd=project_copy)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "refusing to replace it" in result.stderr and "nothing was written" in result.stderr
    assert _tree(project_copy.parent) == before


def test_render_refuses_a_directory_it_did_not_write(tmp_path: Path, project_copy: Path):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "todo.txt").write_text("mine")
    result = render(project_copy, str(out), cwd=tmp_path)
    assert result.returncode == 2
    assert f"{out}: refusing to replace it: it is not empty and was not written by `modelfleet render`" in result.stderr
    assert _tree(out) == {"todo.txt": b"mine"}


def test_render_refuses_a_file(tmp_path: Path, project_copy: Path):
    out = tmp_path / "plan.txt"
    out.write_text("keep me")
    result = render(project_copy, str(out), cwd=tmp_path)
    assert result.returncode == 2 and "it is a file, not a directory" in result.stderr
    assert out.read_text() == "keep me"


def test_render_replaces_its_own_output_and_an_empty_directory(tmp_path: Path, project_copy: Path):
    out = tmp_path / "build" / "dev"
    out.mkdir(parents=True)
    first = render(project_copy, str(out), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert (out / MARKER).is_file() and (out / "plan.json").is_file()
    (out / "plan.json").unlink()  # a file it wrote, gone: nothing of anyone's is lost by replacing the rest
    second = render(project_copy, str(out), cwd=tmp_path, stack="prod")
    assert second.returncode == 0, second.stderr
    assert json.loads((out / "plan.json").read_text())["environment"] == "prod"
    assert not [p for p in _tree(out) if "g6e-xlarge" in p]  # dev's server, not in prod: removed with the rest
    assert sorted(os.listdir(out.parent)) == ["dev"]


def test_the_marker_lists_every_file_written_with_its_digest(tmp_path: Path):
    write_tree(FILES, str(tmp_path / "out"))
    marker = (tmp_path / "out" / MARKER).read_text()
    listed = dict(reversed(line.split("  ", 1)) for line in marker.splitlines() if re.fullmatch(r"[0-9a-f]{64}  .+", line))
    assert listed == {path: hashlib.sha256(data).hexdigest() for path, data in FILES.items()}
    write_tree(FILES, str(tmp_path / "again"))
    assert (tmp_path / "again" / MARKER).read_text() == marker  # the same input, the same bytes


def test_render_refuses_files_it_did_not_write_and_lists_them(tmp_path: Path, project_copy: Path):
    """Defect 1 of #17: a GitOps directory's .git and kustomization.yaml, added to an earlier render, were
    deleted by the next one without a word."""
    out = tmp_path / "gitops"
    assert render(project_copy, str(out), cwd=tmp_path).returncode == 0
    (out / ".git" / "objects" / "ab").mkdir(parents=True)
    (out / ".git" / "objects" / "ab" / "cdef").write_text("blob")
    (out / "kustomization.yaml").write_text("resources: [kubernetes]\n")
    (out / "kubernetes" / "notes").mkdir()  # an empty directory of the user's inside a rendered one
    plan = out / "plan.json"
    plan.write_text(plan.read_text().replace('"dev"', '"dev-edited"', 1))
    before = _tree(out)
    result = render(project_copy, str(out), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{out}: refusing to replace it: it holds what `modelfleet render` did not write: "
                            ".git/ (a directory), kubernetes/notes/ (a directory), kustomization.yaml; and "
                            "plan.json changed since it was written")
    assert "move them out" in first
    assert _tree(out) == before


def test_a_render_of_an_older_release_is_checked_against_what_this_one_writes(tmp_path: Path):
    """Its marker lists nothing: what this render writes is taken as its own, anything else is refused."""
    out = tmp_path / "out"
    out.mkdir()
    (out / MARKER).write_bytes(b"This directory was written by `modelfleet render`. The next render replaces all "
                               b"of it:\nkeep nothing else here.\n")
    (out / "plan.json").write_text("old")
    (out / "mine.txt").write_text("mine")
    with pytest.raises(OutputError, match=r"did not write: mine\.txt"):
        write_tree(FILES, str(out))
    (out / "mine.txt").unlink()
    write_tree(FILES, str(out))
    assert _tree(out)["plan.json"] == FILES["plan.json"]


@pytest.mark.parametrize("out", ["/proc/nope", "/proc/self/status/x", "/dev/null"])
def test_filesystem_errors_are_one_clean_line(tmp_path: Path, project_copy: Path, out: str):
    result = render(project_copy, out, cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[0].startswith(f"{out}: ")


def test_output_gets_the_usual_permissions(tmp_path: Path):
    old = os.umask(0o022)
    try:
        write_tree(FILES, str(tmp_path / "out"))
    finally:
        os.umask(old)
    out = tmp_path / "out"
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "triton" / "s").stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "plan.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((out / MARKER).stat().st_mode) == 0o644


def test_a_strict_umask_is_respected(tmp_path: Path):
    old = os.umask(0o077)
    try:
        write_tree(FILES, str(tmp_path / "out"))
        write_file(str(tmp_path / "client.py"), b"x = 1\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "out" / "plan.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "client.py").stat().st_mode) == 0o600


def test_write_file_has_the_usual_permissions_and_refuses_a_directory(tmp_path: Path):
    old = os.umask(0o022)
    try:
        write_file(str(tmp_path / "new" / "client.py"), b"x = 1\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new" / "client.py").stat().st_mode) == 0o644
    with pytest.raises(OutputError, match="is a directory"):
        write_file(str(tmp_path / "new"), b"x")
    assert os.listdir(tmp_path / "new") == ["client.py"]


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)


@st.composite
def sibling_names(draw, output: str) -> str:
    """Names a render's leftovers could have: either prefix, any process id (one running here or not: a render
    in another PID namespace has ids that mean nothing here), any output name, this output's included."""
    prefix = draw(st.sampled_from([".modelfleet-render-", ".modelfleet-old-"]))
    pid = draw(st.one_of(st.just(_DEAD), st.integers(1, 2**22), st.just(os.getpid())))
    name = draw(st.sampled_from([output, "other", f"x-{output}", "out-2"]))
    token = draw(st.text("0123456789abcdef", min_size=0, max_size=8))
    return draw(st.sampled_from([f"{prefix}{pid}-{token}-{name}", f"{prefix}{token}", f"{prefix}{pid}-{name}"]))


_DEAD = _dead_pid()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_render_deletes_only_what_its_own_lock_file_lists(tmp_path_factory, data):
    """Directories beside --out that merely look like a render's leftovers (another output's, another PID
    namespace's render in progress, an older release's) survive; what a killed render of this output listed in
    its lock file is completed or removed."""
    parent = tmp_path_factory.mktemp("parent")
    others = data.draw(st.sets(sibling_names("out"), min_size=1, max_size=6))
    for name in others:
        (parent / name / "triton").mkdir(parents=True)
        (parent / name / "in-progress").write_text("x")
    killed = f".modelfleet-render-{_DEAD}-0a1b2c3d-out", f".modelfleet-old-{_DEAD}-0a1b2c3d-out"
    mine = [n for n in killed if n not in others]
    for name in mine:
        (parent / name).mkdir()
    (parent / ".modelfleet-lock-out").write_text(f"pid {_DEAD} (modelfleet render), since then\nowns {' '.join(mine)}\n")
    write_tree(FILES, str(parent / "out"))
    assert sorted(os.listdir(parent)) == sorted([*others, "out"])
    for name in others:
        assert (parent / name / "in-progress").read_text() == "x"
    assert _tree(parent / "out") == {**FILES, MARKER: (parent / "out" / MARKER).read_bytes()}


def test_a_killed_renders_half_done_swap_is_completed_from_its_lock_file(tmp_path: Path):
    """The fallback swap's window: --out retired, the staged render not yet moved in, the process killed."""
    write_tree(FILES, str(tmp_path / "out"))
    staged, retired = f".modelfleet-render-{_DEAD}-aa-out", f".modelfleet-old-{_DEAD}-aa-out"
    shutil.copytree(tmp_path / "out", tmp_path / staged)
    (tmp_path / "out").rename(tmp_path / retired)
    lookalike = tmp_path / f".modelfleet-old-{_DEAD}-bb-out"  # not listed: another namespace's, say
    lookalike.mkdir()
    (tmp_path / ".modelfleet-lock-out").write_text(f"pid {_DEAD}\nowns {staged} {retired}\nowns ../escape /etc\n")
    write_tree({"plan.json": b"[]\n"}, str(tmp_path / "out"))
    assert sorted(os.listdir(tmp_path)) == sorted([lookalike.name, "out"])
    assert (tmp_path / "out" / "plan.json").read_bytes() == b"[]\n"


def test_a_lock_file_lists_a_renders_names_before_they_exist(tmp_path: Path, monkeypatch):
    from modelfleet.render import outputs

    seen = []

    def stage(files, staging):
        seen.append((tmp_path / ".modelfleet-lock-out").read_text().splitlines())
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs, "stage", stage)
    with pytest.raises(OutputError):
        write_tree(FILES, str(tmp_path / "out"))
    ((holder, owns),) = seen
    assert holder.startswith(f"pid {os.getpid()} (") and owns.startswith("owns .modelfleet-render-")
    staging, retired = owns.split()[1:]
    assert retired == staging.replace(".modelfleet-render-", ".modelfleet-old-") and staging.endswith("-out")
    assert os.listdir(tmp_path) == []  # nothing was created, so the lock file went too


def test_symlinked_output_is_written_at_its_target(tmp_path: Path):
    real = tmp_path / "real"
    write_tree(FILES, str(real))
    link = tmp_path / "link"
    link.symlink_to(real)
    write_tree({"plan.json": b"[]\n"}, str(link))
    assert link.is_symlink() and (real / "plan.json").read_bytes() == b"[]\n"
    assert _tree(real) == {"plan.json": b"[]\n", MARKER: (real / MARKER).read_bytes()}


def test_a_rendered_path_cannot_escape_the_output(tmp_path: Path):
    with pytest.raises(ValueError, match="outside the output directory"):
        write_tree({"../evil": b"x"}, str(tmp_path / "out"))
    assert not (tmp_path / "evil").exists() and not (tmp_path / "out").exists()
    assert [n for n in os.listdir(tmp_path) if n.startswith(".modelfleet-")] == []


def test_client_out_errors_are_clean(tmp_path: Path, project_copy: Path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(project_copy), "client", "--stack",
                             "dev", "--out", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{tmp_path}: is a directory, not a file" in result.stderr
