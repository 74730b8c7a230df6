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


S3_URI = r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/[^\s]*)?$"
HF_ID = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]*[a-z0-9]$")
TRITON_ARTIFACT_FIX = "write the s3:// directory that holds the model's version folders, e.g. s3://my-bucket/models/resnet50"
LLM_ARTIFACT_FIX = "write a Hugging Face id such as meta-llama/Llama-3.1-8B-Instruct, or an s3:// path to the weights"


def s3_problem(uri: str) -> str | None:
    """What is wrong with an ``s3://bucket/prefix`` URI, in words; None when it is fine."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    if not 3 <= len(bucket) <= 63:
        return f"bucket name {bucket!r} has {len(bucket)} characters: S3 bucket names have 3 to 63"
    if not _BUCKET.match(bucket):
        return (f"bucket name {bucket!r} is not a valid S3 bucket name: lowercase letters, digits, '.' and '-', "
                "starting and ending with a letter or digit")
    if any(c.isspace() for c in key):
        return "the path contains whitespace"
    return None


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
