"""MkDocs hook: the site's home page (docs/index.md) is the repository's README.md.

The README is what a visitor of the repository reads first, and the site's home page
should say the same; serving one file for both keeps a single text. Its links point into
docs/ from the repository's root (``[store](docs/store.md)``), so they are made relative
to docs/, where the site's pages live.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_DOCS_LINK = re.compile(r"\]\(docs/")


def on_page_read_source(page: Any, config: Any) -> str | None:
    """The README's text for index.md; None (the file as it is) for every other page."""
    if page.file.src_uri != "index.md":
        return None
    readme = Path(config["config_file_path"]).parent / "README.md"
    return _DOCS_LINK.sub("](", readme.read_text(encoding="utf-8"))
