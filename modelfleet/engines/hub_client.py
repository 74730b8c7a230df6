"""Reads the Hugging Face Hub for ``validate --online``: a pinned revision's commit, its gating and its
config.json (spec/hub_check.py compares them with models.yaml). The only network client of validate; the
transport is injected (``Fetch``: URL -> bytes), so tests need no network and no mocks.

Endpoints: ``GET {endpoint}/api/models/{repo}/revision/{revision}`` (JSON: ``sha``, ``gated``: false, "auto" or
"manual") and ``GET {endpoint}/{repo}/resolve/{revision}/config.json``. A token (HF_TOKEN) is sent when given:
gated repositories answer 401/403 without one.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable

from ..spec.hub_check import HubFacts, HubTarget

ENDPOINT = "https://huggingface.co"
TIMEOUT_S = 20
Fetch = Callable[[str], bytes]  # raises OSError (urllib.error.URLError, HTTPError) when the Hub does not answer


class NotFound(OSError):
    """The Hub answered 404: no such repository, revision or file."""


def urllib_fetch(token: str | None = None) -> Fetch:
    def fetch(url: str) -> bytes:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        request = urllib.request.Request(url, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # an https URL: read_hub builds it
                return response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise NotFound(url) from None
            raise
    return fetch


def read_hub(target: HubTarget, fetch: Fetch, endpoint: str = ENDPOINT) -> HubFacts:
    """The Hub's answer for one target; NotFound when the repository or revision does not exist, OSError when
    the Hub cannot be reached (or refuses: a gated repository without a token)."""
    info = json.loads(fetch(f"{endpoint}/api/models/{target.repo}/revision/{target.revision}"))
    try:
        config = json.loads(fetch(f"{endpoint}/{target.repo}/resolve/{info['sha']}/config.json"))
    except NotFound:
        config = None
    return HubFacts(sha=str(info["sha"]), gated=info.get("gated") not in (False, None), config=config)
