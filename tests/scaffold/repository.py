"""This repository's own pull-request workflow: the generated one (modelfleet/scaffold/pr_workflow.py) with this
checkout installed, the compiler's sources and tests among its paths, and this repository's test job."""

from __future__ import annotations

from modelfleet.scaffold import actions as a
from modelfleet.scaffold.choices import PULUMI_CLOUD
from modelfleet.scaffold.pr_workflow import render_pr_workflow
from tests.conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "models-pr.yml"
INSTALL = '".[pulumi]"'  # this checkout: the pull request's compiler is the one tested
EXTRA_PATHS = ('"modelfleet/**"', "pyproject.toml", '"scripts/**"', '"tests/**"', ".ci/run")
ORIGIN = ("This repository's own: the workflow `modelfleet init` writes (modelfleet/scaffold/pr_workflow.py) with this\n"
          "# checkout installed, the compiler's sources and tests among the paths, and the test job below\n"
          "# (tests/scaffold/test_workflows.py keeps the two equal; MODELFLEET_UPDATE_GOLDEN=1 rewrites this file).")
TEST_JOB = f"""\
  test:
    name: Tests
    runs-on: ubuntu-latest
    permissions:
      contents: read  # check out the pull request
    steps:
      - uses: {a.CHECKOUT}
        with:
          persist-credentials: false  # nothing pushes: the token must not stay in .git/config
      - uses: {a.SETUP_PYTHON}
        with:
          python-version: "{a.PYTHON_VERSION}"
      - name: Install everything the tests need
        run: bash scripts/setup.sh
      - name: The test suite (as .ci/run runs it)
        run: .venv/bin/python -m pytest -q
"""


def this_repository_workflow(version: str = "0.1.0") -> str:
    return render_pr_workflow(version=version, backend=PULUMI_CLOUD, platform_team="platform", install=INSTALL,
                              extra_paths=EXTRA_PATHS, extra_jobs=TEST_JOB, origin=ORIGIN)
