"""``modelfleet digest DIR``: the content digest of a version folder, to pin it (``version: {number: N,
sha256: ...}``); the definition is spec/digest.py's, the same the pod's init container checks."""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from ..errors import Issue, SpecError

NAME = "digest"
HELP = "print the content digest (sha256) of a model version folder, for version: {number: N, sha256: ...}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="a local copy of the version folder, e.g. fraud-scorer/2")


def run(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    if not directory.is_dir():
        raise SpecError([Issue(str(directory), 0, 0, "", "not a directory", "give the version folder, e.g. "
                               "`aws s3 sync s3://bucket/models/fraud-scorer/2/ v2/ && modelfleet digest v2`")])
    sys.stdout.write(load_folder_digest(directory) + "\n")
    return 0


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_folder_digest(directory: Path) -> str:
    """The digest of ``directory``'s content (module docstring), as the pod computes it."""
    files = sorted((f"./{p.relative_to(directory).as_posix()}".encode(), p) for p in directory.rglob("*") if p.is_file())
    listing = b"".join(_file_sha256(path).encode() + b"  " + name + b"\n" for name, path in files)
    return hashlib.sha256(listing).hexdigest()
