"""A render that fails midway leaves the previous output exactly as it was, and no staging behind."""

from __future__ import annotations

import builtins
import os
from pathlib import Path

import pytest

from modelfleet.errors import OutputError
from modelfleet.render import output_swap
from modelfleet.render.fleet import write_tree


def _tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


@pytest.mark.parametrize("fail_after", [0, 3, 10])
def test_failure_while_writing_keeps_previous_output(tmp_path: Path, project, monkeypatch, fail_after):
    out = tmp_path / "out"
    files = project.rendered("prod")[1]
    write_tree(files, str(out))
    before = _tree(out)
    changed = {k: v + b"\n# changed" for k, v in files.items()}
    real_open, calls = builtins.open, {"n": 0}

    def failing_open(path, mode="r", *args, **kwargs):
        if "w" in mode and ".modelfleet-render-" in str(path):
            calls["n"] += 1
            if calls["n"] > fail_after:
                raise OSError(28, "No space left on device")
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", failing_open)
    with pytest.raises(OutputError, match="No space left on device"):
        write_tree(changed, str(out))
    monkeypatch.setattr(builtins, "open", real_open)
    assert _tree(out) == before
    assert [n for n in os.listdir(tmp_path) if n.startswith(".modelfleet-")] == []


@pytest.mark.parametrize("failing", ["exchange", "move_in"])
def test_failure_during_the_swap_restores_the_previous_output(tmp_path: Path, project, monkeypatch, failing):
    """The exchange failing, or in the fallback (two renames) the staging directory failing to move into place
    after the previous output was set aside."""
    out = tmp_path / "out"
    files = project.rendered("dev")[1]
    write_tree(files, str(out))
    before = _tree(out)

    def failing_step(*args):
        raise OSError(5, "Input/output error")

    if failing == "move_in":
        monkeypatch.setattr(output_swap, "exchange", output_swap.no_exchange)
    monkeypatch.setattr(output_swap, failing, failing_step)
    with pytest.raises(OutputError, match="Input/output error"):
        write_tree({"plan.json": b"{}\n"}, str(out))
    monkeypatch.undo()
    assert _tree(out) == before
    assert [n for n in os.listdir(tmp_path) if n.startswith(".modelfleet-")] == []


def test_failure_while_syncing_keeps_previous_output(tmp_path: Path, project, monkeypatch):
    """fsync is where a full or failing disk often speaks up: the swap must not happen after it fails."""
    out = tmp_path / "out"
    write_tree(project.rendered("dev")[1], str(out))
    before = _tree(out)

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OutputError):
        write_tree({"plan.json": b"{}\n"}, str(out))
    monkeypatch.undo()
    assert _tree(out) == before
    assert [n for n in os.listdir(tmp_path) if n.startswith(".modelfleet-")] == []
