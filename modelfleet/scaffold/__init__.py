"""The files `modelfleet init` writes, as pure text from the user's choices (``InitChoices``) and the installed
version (which the files pin); the command (commands/init.py) asks, writes and refuses. Nothing here touches
disk.

- ``project_files``: Pulumi.yaml, the three-line __main__.py, models.yaml, the stacks, requirements.txt;
- ``codeowners``: CODEOWNERS from the teams in models.yaml (``modelfleet codeowners`` keeps it current);
- ``pr_workflow`` and ``deploy_workflow``: the GitHub workflows; ``actions``: the pinned actions they use;
- ``readme``: the repository's README.
"""

from __future__ import annotations

from collections.abc import Iterable

from .choices import CHOICES, InitChoices
from .codeowners import render_codeowners
from .deploy_workflow import render_deploy_workflow
from .pr_workflow import render_pr_workflow
from .project_files import INIT_STACKS, MAIN, models_yaml, pulumi_yaml, requirements_txt, stack_yaml
from .readme import render_readme

CODEOWNERS = ".github/CODEOWNERS"
INIT_TEAMS = ("assistants", "search")  # the teams of the models models_yaml() writes


def scaffold_files(choices: InitChoices, version: str, *, priced_regions: Iterable[str]) -> dict[str, str]:
    """Every file of a new fleet repository, by path relative to it, in a stable order. ``priced_regions``: the
    regions modelfleet's price table prices (the stacks get a budget there)."""
    priced = choices.region in set(priced_regions)
    files = {
        "Pulumi.yaml": pulumi_yaml(choices, version),
        "__main__.py": MAIN,
        "requirements.txt": requirements_txt(version),
        "models.yaml": models_yaml(),
        **{f"stacks/Pulumi.{stack}.yaml": stack_yaml(choices, stack, priced=priced) for stack in INIT_STACKS},
        ".github/workflows/models-pr.yml": render_pr_workflow(version=version, backend=choices.backend,
                                                                  platform_team=choices.platform_team),
        ".github/workflows/deploy.yml": render_deploy_workflow(version=version, backend=choices.backend,
                                                               stacks=INIT_STACKS),
        CODEOWNERS: render_codeowners(INIT_TEAMS, choices.github_org, choices.platform_team),
        "README.md": render_readme(choices, version, INIT_STACKS),
        ".gitignore": ".venv/\n__pycache__/\nout/\n",
    }
    return dict(sorted(files.items()))


__all__ = ["CHOICES", "CODEOWNERS", "InitChoices", "scaffold_files"]
