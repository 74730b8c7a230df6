"""Talking to a local engine over loopback HTTP: health probes and its Prometheus metrics.

Only the standard library, so the compiler's CLI can import it without any engine installed.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

# Loopback only: never route these requests through an http_proxy from the environment.
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """True when ``GET url`` answers 200 (readiness probes answer 400 while loading)."""
    try:
        with _LOOPBACK.open(url, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?\s*$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def parse_metrics(text: str) -> Samples:
    """Parse the Prometheus text format into ``{(name, frozenset(labels)): value}`` (comments skipped)."""
    samples: Samples = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if line.startswith("#") or match is None:
            continue
        name, labels, value = match.groups()
        pairs = {(key, re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], raw))
                 for key, raw in _LABEL.findall(labels or "")}
        samples[(name, frozenset(pairs))] = float(value)
    return samples


def scrape_metrics(metrics_url: str, timeout: float = 5.0) -> Samples:
    """GET the metrics endpoint and parse it."""
    with _LOOPBACK.open(metrics_url, timeout=timeout) as response:
        return parse_metrics(response.read().decode("utf-8"))


def metric_value(samples: Samples | str, name: str, **labels: str) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels``; KeyError if none matches.

    Why a sum: Triton labels per model *and* version, and callers usually ask per model.
    """
    if isinstance(samples, str):
        samples = parse_metrics(samples)
    wanted = set(labels.items())
    values = [v for (n, pairs), v in samples.items() if n == name and wanted <= pairs]
    if not values:
        raise KeyError(f"no sample {name}{labels or ''}")
    return sum(values)
