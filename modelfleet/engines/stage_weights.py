"""Copies one pinned Hugging Face checkpoint into S3, once: the staging Job's program (render/k8s/staging.py
ships this file's text in a ConfigMap and runs it in the model's vLLM image, which has huggingface_hub, requests
and boto3).

- It lists the repository at the commit and keeps the files vLLM reads (the renderer's patterns).
- It streams each file from the Hub straight into an S3 multipart upload (nothing touches the pod's disk),
  hashing it on the way, *without* a digest in its metadata. LFS files are checked against their sha256, the
  others against their git blob id. Only a file that matches is then marked with its digest (an in-place copy
  that replaces the object's metadata); one that does not is deleted again and the Job fails.
- A file already in S3 with the same size and digest (object metadata) is skipped. The digest is only ever
  written after the bytes under it were verified, so whatever an attempt leaves behind (a failed delete, a kill
  between upload and verify, a failed mark) carries no digest and the next attempt copies it again. A Job
  killed half-way resumes where it stopped, on its next attempt (the Job's backoffLimit).
- ``modelfleet-staged.json`` is written last, listing every file. The pods wait for it, and a run that finds
  it complete does nothing.

Standard library only at import time: the heavy clients are imported in ``main``, so ``stage`` and its checks
are tested directly (tests/test_stage_weights.py).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

MARKER = "modelfleet-staged.json"
DIGEST_KEY = "modelfleet-digest"  # S3 user metadata: "sha256:<hex>" (LFS files) or "git-sha1:<hex>"
PART_BYTES = 64 * 1024**2  # multipart chunk: 10,000 parts hold 625 GiB, far above any one safetensors shard
UPLOAD_THREADS = 8  # about PART_BYTES x 8 = 512 MiB of buffers


@dataclass(frozen=True)
class HubFile:
    path: str
    size: int
    digest: str  # "sha256:<hex>" or "git-sha1:<hex>"


class Store(Protocol):
    def head(self, key: str) -> tuple[int, str | None] | None: ...  # (size, digest metadata) or None
    def upload(self, body: BinaryIO, key: str) -> None: ...  # no digest metadata: nothing is verified yet
    def mark(self, key: str, digest: str) -> None: ...  # sets the digest metadata of a verified object
    def delete(self, key: str) -> None: ...
    def get_json(self, key: str) -> Any: ...  # None when missing
    def put_json(self, key: str, value: Any) -> None: ...


def wanted(path: str, patterns: Sequence[str]) -> bool:
    """As huggingface_hub's allow_patterns match (fnmatch: ``*`` crosses folders)."""
    return any(fnmatch.fnmatch(path, pattern) for pattern in patterns)


class CheckedReader:
    """A read-only stream that hashes and counts what passes through it."""

    def __init__(self, raw: BinaryIO, expected: HubFile) -> None:
        self._raw, self.expected, self.size = raw, expected, 0
        kind = expected.digest.partition(":")[0]
        if kind == "sha256":
            self._hash = hashlib.sha256()
        elif kind == "git-sha1":  # git's blob id: sha1 of "blob <size>\0" and the content
            self._hash = hashlib.sha1(f"blob {expected.size}\0".encode())
        else:
            raise ValueError(f"{expected.path}: unknown digest {expected.digest!r}")

    def read(self, size: int = -1) -> bytes:
        chunk = self._raw.read(size)
        self.size += len(chunk)
        self._hash.update(chunk)
        return chunk

    def digest(self) -> str:
        return f"{self.expected.digest.partition(':')[0]}:{self._hash.hexdigest()}"

    def problem(self) -> str | None:
        """Why what was read is not the file the Hub lists (None: it is)."""
        if self.size != self.expected.size:
            return f"read {self.size:,} bytes, the Hub lists {self.expected.size:,}"
        if self.digest() != self.expected.digest:
            return f"digest {self.digest()}, the Hub lists {self.expected.digest}"
        return None


class StageError(RuntimeError):
    pass


def manifest(repo: str, revision: str, files: Iterable[HubFile]) -> dict[str, Any]:
    return {"repository": repo, "revision": revision,
            "files": [{"path": f.path, "size": f.size, "digest": f.digest} for f in sorted(files, key=lambda f: f.path)]}


def stage(repo: str, revision: str, files: Sequence[HubFile], open_remote: Callable[[str], BinaryIO], store: Store,
          prefix: str, log: Callable[[str], None] = print) -> int:
    """Copies ``files`` under ``prefix``; returns how many were uploaded (0: the prefix was complete)."""
    if not files:
        raise StageError(f"{repo}@{revision}: no file matches the patterns (is the commit right?)")
    done = manifest(repo, revision, files)
    marker = f"{prefix}/{MARKER}"
    if store.get_json(marker) == done:
        log(f"s3 prefix {prefix} already holds {repo}@{revision}: nothing to do")
        return 0
    uploaded, total = 0, sum(f.size for f in files)
    log(f"staging {repo}@{revision}: {len(files)} files, {total / 1024**3:,.1f} GiB, into {prefix}")
    for f in sorted(files, key=lambda f: f.path):
        key = f"{prefix}/{f.path}"
        if store.head(key) == (f.size, f.digest):
            log(f"  {f.path}: already there")
            continue
        started, reader = time.monotonic(), CheckedReader(open_remote(f.path), f)
        store.upload(reader, key)
        if problem := reader.problem():
            store.delete(key)  # if this fails too, the object carries no digest: the next attempt copies it again
            raise StageError(f"{repo}@{revision} {f.path}: {problem}; the object was deleted again")
        store.mark(key, f.digest)
        seconds = max(time.monotonic() - started, 1e-3)
        log(f"  {f.path}: {f.size / 1024**2:,.0f} MiB in {seconds:,.0f} s ({f.size / 1024**2 / seconds:,.0f} MiB/s)")
        uploaded += 1
    store.put_json(marker, done)
    log(f"staged: {uploaded} uploaded, {len(files) - uploaded} already there; {marker} written")
    return uploaded


def hub_files(entries: Iterable[Any], patterns: Sequence[str]) -> list[HubFile]:
    """huggingface_hub's RepoFile entries (folders have no ``blob_id``) as HubFiles, the wanted ones."""
    files = []
    for entry in entries:
        if not hasattr(entry, "blob_id") or not wanted(entry.path, patterns):
            continue
        digest = f"sha256:{entry.lfs.sha256}" if entry.lfs is not None else f"git-sha1:{entry.blob_id}"
        files.append(HubFile(entry.path, entry.size, digest))
    return files


def main() -> None:  # pragma: no cover - runs in the Job, against the Hub and S3
    import boto3
    import requests
    from boto3.s3.transfer import TransferConfig
    from botocore.exceptions import ClientError
    from huggingface_hub import HfApi, hf_hub_url
    from huggingface_hub.utils import build_hf_headers

    repo, revision = os.environ["MODELFLEET_REPOSITORY"], os.environ["MODELFLEET_REVISION"]
    bucket, prefix = os.environ["MODELFLEET_BUCKET"], os.environ["MODELFLEET_PREFIX"]
    patterns = json.loads(os.environ["MODELFLEET_PATTERNS"])
    s3, session = boto3.client("s3"), requests.Session()
    transfer = TransferConfig(multipart_chunksize=PART_BYTES, max_concurrency=UPLOAD_THREADS)

    class S3Store:
        def head(self, key: str) -> tuple[int, str | None] | None:
            try:
                found = s3.head_object(Bucket=bucket, Key=key)
            except ClientError as error:
                if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                    return None
                raise
            return found["ContentLength"], found.get("Metadata", {}).get(DIGEST_KEY)

        def upload(self, body: BinaryIO, key: str) -> None:
            s3.upload_fileobj(body, bucket, key, Config=transfer)

        def mark(self, key: str, digest: str) -> None:  # server-side copy onto itself (multipart above 5 GiB)
            s3.copy({"Bucket": bucket, "Key": key}, bucket, key, Config=transfer,
                    ExtraArgs={"Metadata": {DIGEST_KEY: digest}, "MetadataDirective": "REPLACE"})

        def delete(self, key: str) -> None:
            s3.delete_object(Bucket=bucket, Key=key)

        def get_json(self, key: str) -> Any:
            try:
                return json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
            except ClientError as error:
                if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                    return None
                raise

        def put_json(self, key: str, value: Any) -> None:
            s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(value, indent=1).encode(),
                          ContentType="application/json")

    def open_remote(path: str) -> BinaryIO:
        response = session.get(hf_hub_url(repo, path, revision=revision), headers=build_hf_headers(), stream=True,
                               timeout=(30, 300))
        response.raise_for_status()
        response.raw.decode_content = True  # small JSON files may come compressed
        return response.raw

    files = hub_files(HfApi().list_repo_tree(repo, revision=revision, recursive=True), patterns)
    stage(repo, revision, files, open_remote, S3Store(), prefix, log=lambda line: print(line, flush=True))


if __name__ == "__main__":
    main()
