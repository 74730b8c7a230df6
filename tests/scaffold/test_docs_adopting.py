"""docs/operations/adopting.md names every question of `modelfleet init`, with its flag and its default, and every
file init writes."""

from __future__ import annotations

from modelfleet.commands.init import priced_regions
from modelfleet.scaffold import CHOICES, InitChoices, scaffold_files
from modelfleet.scaffold.choices import default_of
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "operations" / "adopting.md"


def test_every_choice_is_documented_with_its_flag_and_default():
    text = PAGE.read_text()
    for choice in CHOICES:
        assert f"| `{choice.flag}` | `{default_of(choice.field)}` |" in text, choice.flag


def test_every_file_init_writes_is_documented():
    text = PAGE.read_text()
    for path in scaffold_files(InitChoices(), "0", priced_regions=priced_regions()):
        assert f"`{path}`" in text, path
