"""render/manifests.dump_files: the manifests written in forked workers are the bytes written in process, in the
same order, whatever the number of workers; below FILES_PER_WORKER files per worker nothing is forked."""

from __future__ import annotations

import pytest

from modelfleet.render import manifests
from modelfleet.render.k8s.yaml_dump import dump_yaml
from modelfleet.render.manifests import dump_files, render_fleet_manifests


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_workers_write_the_same_bytes_in_the_same_order(project, plans, stack, monkeypatch):
    groups = render_fleet_manifests(plans[stack], project.environment(stack).deploy)
    files = [groups[name] for name in sorted(groups)]
    expected = [dump_yaml(objects) for objects in files]
    monkeypatch.setattr(manifests, "FILES_PER_WORKER", 1)  # the examples have a few files: fork for them
    assert dump_files(files, workers=2) == expected
    assert dump_files(files, workers=3) == expected


def test_few_files_are_not_worth_a_fork(monkeypatch):
    def no_fork(*args, **kwargs):
        raise AssertionError("forked for too few files")
    monkeypatch.setattr(manifests, "forked_pool", no_fork)
    files = [[{"kind": "ConfigMap", "metadata": {"name": f"c{i}"}}] for i in range(manifests.FILES_PER_WORKER)]
    assert dump_files(files, workers=2) == [dump_yaml(f) for f in files]
