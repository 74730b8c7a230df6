"""The content digest of a version folder (``version: {number: N, sha256: ...}``), defined once for both sides.

The pod's init container computes it with coreutils (``DIGEST_PIPELINE``, run inside the copied folder) and
``modelfleet digest DIR`` with Python (``folder_digest``); tests/spec/test_digest.py checks they agree. The
definition: every regular file under the folder, as ``./relative/path``, sorted bytewise; the SHA-256 of the
lines ``<sha256 of the file>  ./<path>`` (sha256sum's own format), and of nothing else.
"""

from __future__ import annotations

DIGEST_PIPELINE = "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum | sha256sum | cut -c1-64"
