from __future__ import annotations

import argparse
import json

from ..spec.load import model_schema

NAME = "schema"
HELP = "print the JSON Schema of models.yaml (for editors: models.schema.json)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    return None


def render_schema() -> str:
    return json.dumps(model_schema(), indent=2, sort_keys=True) + "\n"


def run(args: argparse.Namespace) -> int:
    print(render_schema(), end="")
    return 0
