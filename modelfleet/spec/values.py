"""The scalar values of the models.yaml language: bounded numbers, parameter counts and artifact paths,
each checked with a message in our words (a :class:`FieldProblem` carries the fix).

Every bound is named here with its reason, and repeated in the field's ``description`` (which editors show
from models.schema.json and a range error repeats as its fix).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Optional

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema

from .units import format_param_count, parse_param_count


class FieldProblem(ValueError):
    """A cross-field problem that belongs to one field: the loader points at ``path`` (inside the model)."""

    def __init__(self, path: tuple[str, ...], message: str, fix: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.fix = fix


def lists_as_tuples(data: Any) -> Any:
    """YAML gives lists; frozen specs hold tuples, and strict validation takes only tuples. A list written
    where something else belongs becomes a tuple too, and is rejected as "a list" all the same."""
    if isinstance(data, dict):
        return {key: tuple(value) if isinstance(value, list) else value for key, value in data.items()}
    return data


def quantity(low: float, high: float, why: str, *, low_inclusive: bool = False, kind: type = float,
             optional: bool = False) -> Any:
    """A bounded, finite number (or None when ``optional``); ``why``, its unit and the reason for its bound,
    is the field's description: editors show it, and an error repeats it as the fix."""
    lower = {"ge": low} if low_inclusive else {"gt": low}
    number = Annotated[kind, Field(le=high, **lower)]
    return Annotated[Optional[number] if optional else number, Field(description=why)]


S3_URI = r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/[A-Za-z0-9._=\-]+)+/?$"
HF_ID = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]*[a-z0-9]$")
_IP_ADDRESS = re.compile(r"^\d+\.\d+\.\d+\.\d+$")
# Reserved by S3 for access points, Object Lambda, Multi-Region Access Points, directory and table buckets.
_BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
# A key's segments: letters, digits, '.', '_', '=' and '-' (S3's safe characters, less '*', which IAM reads as a
# wildcard, and the few that some clients quote or normalise). IAM also reads '?' as a wildcard and '${...}' as
# a policy variable; a segment '.' or '..' is normalised away by clients but not by IAM, and '//' names a
# different key than the one clients read: each would make the pods' grant other than the prefix declared.
_KEY_SEGMENT = re.compile(r"^[A-Za-z0-9._=-]+$")
_IAM_SPECIALS = {"*": "a wildcard in IAM (any run of characters)", "?": "a wildcard in IAM (any one character)",
                 "$": "the start of an IAM policy variable (${...})"}
MAX_S3_PREFIX_BYTES = 768  # S3 keys have at most 1,024 bytes: room for the files' own paths under the prefix
TRITON_ARTIFACT_FIX = "write the s3:// directory that holds the model's version folders, e.g. s3://my-bucket/models/resnet50"
LLM_ARTIFACT_FIX = "write a Hugging Face id such as meta-llama/Llama-3.1-8B-Instruct, or an s3:// path to the weights"


def bucket_problem(bucket: str) -> str | None:
    """What S3's bucket naming rules refuse in ``bucket``, in words; None when it is a valid name."""
    if not 3 <= len(bucket) <= 63:
        return f"bucket name {bucket!r} has {len(bucket)} characters: S3 bucket names have 3 to 63"
    if not _BUCKET.match(bucket) or ".." in bucket:
        return (f"bucket name {bucket!r} is not a valid S3 bucket name: lowercase letters, digits, '.' and '-', "
                "starting and ending with a letter or digit, no two periods in a row")
    if _IP_ADDRESS.match(bucket):
        return f"bucket name {bucket!r} is formatted as an IP address, which S3 refuses"
    reserved = next((a for a in _BUCKET_RESERVED_PREFIXES if bucket.startswith(a)), None) or next(
        (a for a in _BUCKET_RESERVED_SUFFIXES if bucket.endswith(a)), None)
    return None if reserved is None else f"bucket name {bucket!r} uses {reserved!r}, which S3 reserves"


def s3_problem(uri: str) -> str | None:
    """What is wrong with an ``s3://bucket/prefix`` URI, in words; None when it is fine. The prefix is what a
    pod's IAM grant covers (render/iam.py): it must be a literal prefix IAM cannot read more into."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    if problem := bucket_problem(bucket):
        return problem
    key = key.removesuffix("/")
    if not key:
        return "names a whole bucket: the pods' role would read every object in it"
    for segment in key.split("/"):
        if problem := _segment_problem(segment):
            return problem
    if len(key.encode()) > MAX_S3_PREFIX_BYTES:
        return f"the key prefix has {len(key.encode())} bytes: at most {MAX_S3_PREFIX_BYTES} (S3 keys have 1,024)"
    return None


def _segment_problem(segment: str) -> str | None:
    if not segment:
        return "has an empty path segment ('//'): S3 keys are literal, so the grant would not be the prefix read"
    if segment in (".", ".."):
        return f"has a {segment!r} path segment: clients resolve it, IAM and S3 do not"
    if _KEY_SEGMENT.match(segment):
        return None
    special = next((c for c in segment if c in _IAM_SPECIALS), None)
    if special is not None:
        return f"{special!r} is {_IAM_SPECIALS[special]}: the pods' grant would cover more than the prefix"
    odd = "".join(sorted({c for c in segment if not re.match(r"[A-Za-z0-9._=-]", c)}))
    return (f"the path has characters S3 clients or IAM may read differently ({odd!r}): use letters, digits, "
            "'.', '_', '=' and '-' between the slashes")


def _triton_artifact(value: str) -> str:
    if not value.startswith("s3://"):
        raise FieldProblem((), f"{value!r} is not an s3:// path: Triton loads a classic model from its "
                           "model-repository directory", TRITON_ARTIFACT_FIX)
    problem = s3_problem(value)
    if problem:
        raise FieldProblem((), f"{value!r}: {problem}", TRITON_ARTIFACT_FIX)
    return value


def _llm_artifact(value: str) -> str:
    if value.startswith("s3://"):
        problem = s3_problem(value)
        if problem:
            raise FieldProblem((), f"{value!r}: {problem}", LLM_ARTIFACT_FIX)
    elif not re.match(HF_ID, value):
        raise FieldProblem((), f"{value!r} is neither a Hugging Face id (org/model) nor an s3:// path", LLM_ARTIFACT_FIX)
    return value


TritonArtifact = Annotated[str, AfterValidator(_triton_artifact), WithJsonSchema({"type": "string", "pattern": S3_URI})]
LlmArtifact = Annotated[str, AfterValidator(_llm_artifact),
                        WithJsonSchema({"type": "string", "pattern": f"{S3_URI}|{HF_ID}"})]

# ---------------------------------------------------------------------------------------------- bounds
MAX_PARAMS = 10**14  # 100T parameters: 50x the largest published model; more is a unit typo
MAX_DIM = 2**31 - 1  # the largest tensor dimension TensorRT and most backends address (int32)
MAX_PEAK_RPS = 10_000_000  # per model; more is several deployments, not one model's SLA
MAX_LATENCY_MS = 600_000  # ten minutes: beyond it a request is a batch job, not a serving SLA
MAX_TPOT_MS = 10_000  # ten seconds per output token: slower is no longer a stream anyone reads
MAX_SEQUENCES = 1_000_000  # concurrent sequences of one LLM (peak_concurrent_sequences or derived)
MAX_CONTEXT_TOKENS = 2_097_152  # 2M tokens: the longest context any preset serves, with room
MAX_POSITION_EMBEDDINGS = 16_777_216  # 16M: the longest context any published model accepts (10M), with room
MAX_OUTPUT_TOKENS_PER_S = 100_000_000  # per model, at peak
MAX_VERSION = 2**63 - 1  # Triton version folders are int64


PARAMS_FIX = "write a number with K, M, B (= G) or T, e.g. 350M or 8B"


def _params(value: Any) -> int:
    """A parameter count (units.parse_param_count) in our words, at most MAX_PARAMS."""
    try:
        count = parse_param_count(value)
    except ValueError:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise FieldProblem((), f"a parameter count must be positive, got {value}", PARAMS_FIX) from None
        raise FieldProblem((), f"{value!r} is not a parameter count", PARAMS_FIX) from None
    if count > MAX_PARAMS:
        raise FieldProblem((), f"{count:,} parameters is more than the {format_param_count(MAX_PARAMS)} modelfleet "
                           "plans for", f"check the unit: {PARAMS_FIX}")
    return count


Params = Annotated[int, BeforeValidator(_params), WithJsonSchema({
    "anyOf": [{"type": "integer", "exclusiveMinimum": 0, "maximum": MAX_PARAMS},
              {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[KMBGTkmbgt]?\s*$"}],
    "description": "parameter count: an integer or a number with K, M, B or T (350M, 8B, 1.5T); at most 100T"})]
