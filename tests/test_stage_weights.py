"""The staging Job's program (modelfleet/engines/stage_weights.py): what it copies, what it skips, what it
refuses, and that a copy cut short resumes. Run against an in-memory store and in-memory Hub files; its two
real clients (huggingface_hub and boto3) run only in the Job."""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.engines import stage_weights as sw
from modelfleet.render.k8s.staging import SCRIPT, stage_objects
from modelfleet.render.k8s.vllm import DOWNLOAD_PATTERNS

REPO, REVISION, PREFIX = "meta-llama/Tiny", "0" * 40, "weights/meta-llama/Tiny/" + "0" * 40


def git_blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


CONTENT = {"config.json": b'{"architectures": ["LlamaForCausalLM"]}',
           "model-00001-of-00002.safetensors": bytes(range(256)) * 1000,
           "model-00002-of-00002.safetensors": b"\x01" * 70_000}


def hub_file(path: str, content: bytes) -> sw.HubFile:
    digest = (f"sha256:{hashlib.sha256(content).hexdigest()}" if path.endswith(".safetensors")
              else f"git-sha1:{git_blob_id(content)}")
    return sw.HubFile(path, len(content), digest)


FILES = [hub_file(p, c) for p, c in CONTENT.items()]


class MemoryStore:
    """S3 as the program uses it: objects with a digest in their metadata, and a log of writes in order."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str | None]] = {}
        self.writes: list[str] = []

    def head(self, key):
        if key not in self.objects:
            return None
        body, digest = self.objects[key]
        return len(body), digest

    def upload(self, body, key):
        self.objects[key] = (b"".join(iter(lambda: body.read(8192), b"")), None)
        self.writes.append(key)

    def mark(self, key, digest):
        self.objects[key] = (self.objects[key][0], digest)

    def delete(self, key):
        del self.objects[key]

    def get_json(self, key):
        import json
        return json.loads(self.objects[key][0]) if key in self.objects else None

    def put_json(self, key, value):
        import json
        self.objects[key] = (json.dumps(value).encode(), None)
        self.writes.append(key)


def opener(content: dict[str, bytes], opened: list[str] | None = None):
    def open_remote(path):
        if opened is not None:
            opened.append(path)
        return io.BytesIO(content[path])
    return open_remote


def test_copies_every_file_and_writes_the_marker_last():
    store = MemoryStore()
    assert sw.stage(REPO, REVISION, FILES, opener(CONTENT), store, PREFIX, log=lambda _: None) == 3
    assert store.writes[-1] == f"{PREFIX}/{sw.MARKER}"
    for f in FILES:
        body, digest = store.objects[f"{PREFIX}/{f.path}"]
        assert body == CONTENT[f.path] and digest == f.digest
    assert [f["path"] for f in store.get_json(f"{PREFIX}/{sw.MARKER}")["files"]] == sorted(CONTENT)


def test_a_complete_prefix_is_left_alone():
    store = MemoryStore()
    sw.stage(REPO, REVISION, FILES, opener(CONTENT), store, PREFIX, log=lambda _: None)
    opened: list[str] = []
    store.writes.clear()
    assert sw.stage(REPO, REVISION, FILES, opener(CONTENT, opened), store, PREFIX, log=lambda _: None) == 0
    assert opened == [] and store.writes == []


def test_a_copy_cut_short_resumes_where_it_stopped():
    """The Job's pod died after the first shard: its next attempt reads only what is missing or wrong."""
    store = MemoryStore()
    first = next(f for f in FILES if f.path.startswith("model-00001"))
    store.objects[f"{PREFIX}/{first.path}"] = (CONTENT[first.path], first.digest)
    torn = next(f for f in FILES if f.path.startswith("model-00002"))  # an object of the right name, wrong bytes
    store.objects[f"{PREFIX}/{torn.path}"] = (b"\x01" * 10, torn.digest)
    opened: list[str] = []
    assert sw.stage(REPO, REVISION, FILES, opener(CONTENT, opened), store, PREFIX, log=lambda _: None) == 2
    assert sorted(opened) == ["config.json", torn.path]
    assert store.objects[f"{PREFIX}/{torn.path}"][0] == CONTENT[torn.path]
    assert store.writes[-1].endswith(sw.MARKER)


@pytest.mark.parametrize("damage", ["truncated", "altered"])
def test_a_file_that_fails_its_digest_is_deleted_and_nothing_is_marked(damage):
    bad = dict(CONTENT)
    shard = "model-00001-of-00002.safetensors"
    bad[shard] = CONTENT[shard][:-1] if damage == "truncated" else b"\xff" + CONTENT[shard][1:]
    store = MemoryStore()
    with pytest.raises(sw.StageError, match=shard):
        sw.stage(REPO, REVISION, FILES, opener(bad), store, PREFIX, log=lambda _: None)
    assert f"{PREFIX}/{shard}" not in store.objects
    assert f"{PREFIX}/{sw.MARKER}" not in store.objects


def test_a_marker_of_another_file_list_is_not_trusted():
    """The marker lists the files it vouches for: a different listing (another revision's) copies again."""
    store = MemoryStore()
    store.objects[f"{PREFIX}/{sw.MARKER}"] = (b'{"files": []}', None)
    assert sw.stage(REPO, REVISION, FILES, opener(CONTENT), store, PREFIX, log=lambda _: None) == 3


def test_nothing_to_copy_is_an_error():
    with pytest.raises(sw.StageError, match="no file matches"):
        sw.stage(REPO, REVISION, [], opener({}), MemoryStore(), PREFIX, log=lambda _: None)


@dataclass
class Lfs:
    sha256: str


@dataclass
class RepoFile:  # huggingface_hub's RepoFile's fields the program reads
    path: str
    size: int
    blob_id: str
    lfs: Lfs | None = None


@dataclass
class RepoFolder:
    path: str


def test_hub_listing_keeps_what_vllm_reads_with_their_digests():
    entries = [RepoFile("config.json", 10, "a" * 40), RepoFile("model.safetensors", 99, "b" * 40, Lfs("c" * 64)),
               RepoFolder("original"), RepoFile("original/consolidated.00.pth", 99, "d" * 40, Lfs("e" * 64)),
               RepoFile("README.md", 5, "f" * 40), RepoFile("tokenizer.model", 7, "9" * 40, Lfs("8" * 64))]
    files = sw.hub_files(entries, DOWNLOAD_PATTERNS)
    assert files == [sw.HubFile("config.json", 10, "git-sha1:" + "a" * 40),
                     sw.HubFile("model.safetensors", 99, "sha256:" + "c" * 64),
                     sw.HubFile("tokenizer.model", 7, "sha256:" + "8" * 64)]


def test_the_git_blob_digest_is_gits(tmp_path):
    """A non-LFS file is checked against its git blob id: the same hash git itself computes."""
    content = CONTENT["config.json"]
    (tmp_path / "config.json").write_bytes(content)
    git = subprocess.run(["git", "hash-object", str(tmp_path / "config.json")], capture_output=True, text=True,
                         check=True).stdout.strip()
    reader = sw.CheckedReader(io.BytesIO(content), sw.HubFile("config.json", len(content), f"git-sha1:{git}"))
    while reader.read(7):
        pass
    assert reader.problem() is None


def test_the_job_sets_every_variable_the_program_reads(plans):
    model = next(m for m in plans["prod"].models if getattr(m, "weights", None) and m.weights.source == "staged")
    job = next(o for o in stage_objects(plans["prod"], model, DOWNLOAD_PATTERNS, "token") if o["kind"] == "Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    given = {e["name"] for e in container["env"]}
    read = set(re.findall(r'os\.environ\["(\w+)"\]', SCRIPT.read_text()))
    assert read and read <= given


class FailingStore(MemoryStore):
    """S3 that fails one call of one kind (a network error, a killed pod) after the given number of them."""

    def __init__(self, fail: str, after: int) -> None:
        super().__init__()
        self.fail, self.left = fail, after

    def _maybe_fail(self, kind: str) -> None:
        if kind == self.fail:
            self.left -= 1
            if self.left < 0:
                raise ConnectionError(f"{kind} failed")

    def upload(self, body, key):
        super().upload(body, key)  # the bytes land, then the call fails (a lost response)
        self._maybe_fail("upload")

    def mark(self, key, digest):
        self._maybe_fail("mark")
        super().mark(key, digest)

    def delete(self, key):
        self._maybe_fail("delete")
        super().delete(key)


@st.composite
def damaged_hubs(draw):
    """The Hub's files, one of them served wrong once: truncated, extended or with a byte changed, at any offset."""
    path = draw(st.sampled_from(sorted(CONTENT)))
    body = CONTENT[path]
    offset = draw(st.integers(0, len(body) - 1))
    how = draw(st.sampled_from(["truncate", "extend", "flip"]))
    bad = (body[:offset] if how == "truncate" else body + body[offset:offset + 1] if how == "extend" else
           body[:offset] + bytes([body[offset] ^ draw(st.integers(1, 255))]) + body[offset + 1:])
    return path, bad


@settings(max_examples=150, deadline=None)
@given(damaged_hubs(), st.sampled_from(["delete", "mark", "upload", "none"]), st.integers(0, 3))
def test_no_attempt_trusts_bytes_that_were_never_verified(damaged, fail, after):
    """Whatever one attempt leaves behind (wrong bytes it could not delete, a verified object it could not mark,
    an upload whose answer was lost), the next attempt with the right bytes ends with every object exactly the
    Hub's and the marker written; and nothing ever carries a digest its bytes do not have."""
    path, bad = damaged
    store = FailingStore(fail, after)
    with pytest.raises((sw.StageError, ConnectionError)):
        sw.stage(REPO, REVISION, FILES, opener({**CONTENT, path: bad}), store, PREFIX, log=lambda _: None)
    assert f"{PREFIX}/{sw.MARKER}" not in store.objects
    for key, (body, digest) in store.objects.items():
        f = next(f for f in FILES if key == f"{PREFIX}/{f.path}")
        assert digest is None or (body == CONTENT[f.path] and digest == f.digest), (key, digest)
    store.fail = "none"
    sw.stage(REPO, REVISION, FILES, opener(CONTENT), store, PREFIX, log=lambda _: None)
    for f in FILES:
        assert store.objects[f"{PREFIX}/{f.path}"] == (CONTENT[f.path], f.digest), f.path
    assert store.get_json(f"{PREFIX}/{sw.MARKER}") == sw.manifest(REPO, REVISION, FILES)
