"""Deterministic synthetic catalogues for the benchmarks (no randomness without a seed)."""

from __future__ import annotations

import hashlib
import random

import yaml

PRESETS = ("llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "llama-3.3-70b", "qwen2.5-72b", "mixtral-8x7b")
CLASSIC_TYPES = ("vision", "nlp", "tabular", "embedding", "audio")


def classic(i: int, rng: random.Random, small: bool = False) -> dict:
    memory = round(rng.uniform(0.1, 1.0 if small else 6.0), 2)
    return {"name": f"classic-{i:05d}", "type": rng.choice(CLASSIC_TYPES), "framework": "onnx",
            "artifact": f"s3://synthetic-models/classic-{i:05d}", "version": 1, "size": {"memory_gib": memory},
            "inputs": [{"name": "x", "dtype": "fp32", "dims": [rng.choice([16, 64, 256])]}],
            "outputs": [{"name": "y", "dtype": "fp32", "dims": [rng.choice([1, 10, 100])]}],
            "sla": {"p99_latency_ms": rng.choice([50, 100, 200]),
                    "peak_rps": rng.choice([5, 20, 50]) if small else rng.choice([10, 50, 200, 1000]),
                    "availability": rng.choice([99.0, 99.5, 99.9])},
            "profile": {"rps_per_instance": rng.choice([500, 1000, 2000]), "measured_on": "a10g",
                        "compute_ms": rng.choice([2, 5, 10])}}


def llm(i: int, rng: random.Random, distinct_traffic: bool = False) -> dict:
    """An LLM of one of 36 specs (6 architectures, 2 contexts, 3 concurrencies) under its own name and revision,
    so LLMs share their simulations (seeded from the traffic); ``distinct_traffic``: each LLM's closed loop of
    users also thinks its own i + 1 milliseconds between requests (a load the same to within a fraction of a
    percent, a traffic of its own), so none shares a simulation: the worst case for the simulations."""
    # Pinned like every model of a stack that requires pins (the bench stack copies prod's requirePins).
    return {"name": f"llm-{i:05d}", "type": "llm", "artifact": "org/model", "revision": hashlib.sha1(f"llm-{i:05d}".encode()).hexdigest(),
            "size": {"dtype": "bf16"},
            "architecture": rng.choice(PRESETS),
            "sla": {"max_context_tokens": rng.choice([4096, 8192]), "peak_concurrent_sequences": rng.choice([4, 16, 32]),
                    "p99_ttft_ms": 4000,
                    **({"traffic": {"arrivals": "closed", "think_time_s": (i + 1) / 1000}} if distinct_traffic else {})}}


def catalogue(n: int, llm_share: float = 0.2, seed: int = 0, small: bool = False,
              distinct_traffic: bool = False) -> dict:
    rng = random.Random(seed)
    n_llm = int(n * llm_share)
    return {"models": [llm(i, rng, distinct_traffic) for i in range(n_llm)] + [classic(i, rng, small) for i in range(n - n_llm)]}


def catalogue_text(n: int, **kwargs) -> str:
    return yaml.safe_dump(catalogue(n, **kwargs), sort_keys=False)
