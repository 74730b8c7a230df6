"""The Pulumi program: modelfleet's own (modelfleet/program), as every fleet repository runs it."""

from modelfleet.program import run

run()
