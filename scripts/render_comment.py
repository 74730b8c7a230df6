"""Render a PR comment (markdown) as GitHub shows it, to PNG, for the docs: python-markdown to HTML with a
GitHub-like stylesheet, then a headless Chromium screenshot (Debian's `chromium`).

    .venv/bin/python scripts/render_comment.py docs/images/pr-comment.md docs/images/pr-comment.png prod

The optional third argument opens that stack's resource list, as a reviewer who clicked it sees it (the
markdown itself is the comment as posted, every list closed). docs/images/pr-comment.md is the comment the
workflow posts for tests/cost/fixtures/add-70b.yaml, against `main`; tests/test_docs.py fails when it drifts
from the golden comment, and then both are regenerated (the markdown from the workflow, the PNG with this)."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import tempfile

import markdown

STYLE = """
body { font-family: -apple-system, 'DejaVu Sans', sans-serif; font-size: 14px; color: #1f2328; margin: 0;
       background: #fff; }
.comment { width: 1180px; margin: 16px; border: 1px solid #d0d7de; border-radius: 6px; }
.head { background: #f6f8fa; border-bottom: 1px solid #d0d7de; padding: 8px 16px; color: #59636e; }
.body { padding: 8px 16px 16px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 4px 10px; vertical-align: top; }
th { background: #f6f8fa; } tr:nth-child(2n) td { background: #f6f8fa; }
code { background: rgba(175,184,193,0.2); border-radius: 4px; padding: 1px 4px; font-size: 12px; }
h3 { font-size: 18px; margin: 12px 0 8px; } h4 { font-size: 15px; margin: 14px 0 6px; }
details { margin: 6px 0; } summary { cursor: pointer; }
"""


def html(comment: str, opened: str = "") -> str:
    if opened:
        comment = comment.replace(f"<details><summary><b>{opened}</b>", f"<details open><summary><b>{opened}</b>")
    # GitHub renders markdown inside <details> after a blank line; python-markdown wants it said
    body = markdown.markdown(comment.replace("<details", '<details markdown="1"'), extensions=["tables", "md_in_html"])
    return (f"<html><head><meta charset='utf-8'><style>{STYLE}</style></head><body><div class='comment'>"
            f"<div class='head'><b>github-actions</b> bot commented</div><div class='body'>{body}</div></div>"
            "</body></html>")


def main(source: str, target: str, opened: str = "", height: int = 2600) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        page = pathlib.Path(scratch) / "comment.html"
        page.write_text(html(pathlib.Path(source).read_text(), opened))
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={pathlib.Path(target).resolve()}", f"--window-size=1214,{height}",
                        page.as_uri()], check=True, capture_output=True)


if __name__ == "__main__":
    main(*sys.argv[1:4], *(int(a) for a in sys.argv[4:5]))
