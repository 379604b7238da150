"""mkdocs hooks (mkdocs.yml ``hooks:``): repository links, and each package's members for the API reference.

A page links to the repository's other files (``../CONTRIBUTING.md``, ``../packages/...``) as
GitHub shows them; on the site those files do not exist, so each such link becomes
``{repo_url}/blob/main/<path>``, and a link to a file that is in neither place stays as it is
for mkdocs to report.

A package's ``__init__`` re-exports its API lazily (``litdata_format.lazy``): its ``__all__`` exists
at run time only, so mkdocstrings, which reads the source, would list no member. Each
``::: package`` line of a page gets the package's ``__all__`` as its ``members`` option.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

_LINK = re.compile(r"\]\((\.\./[^)#\s]+)(#[^)\s]*)?\)")
_API = re.compile(r"^::: ([a-z_]+)$", re.M)


def _members(match: re.Match[str]) -> str:
    names = [n for n in importlib.import_module(match[1]).__all__ if n != "__version__"]
    return f"{match[0]}\n    options:\n      show_root_heading: false\n      members: [{', '.join(names)}]"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Rewrite the page's links to files outside docs/ (that exist) as links to them on the repository."""
    docs = Path(config["docs_dir"]).resolve()
    page_dir = (docs / page.file.src_uri).parent
    root = docs.parent

    def repository_link(match: re.Match[str]) -> str:
        target = (page_dir / match[1]).resolve()
        if target.is_relative_to(docs) or not target.exists() or not target.is_relative_to(root):
            return match[0]
        return f"]({config['repo_url']}/blob/main/{target.relative_to(root).as_posix()}{match[2] or ''})"

    return _API.sub(_members, _LINK.sub(repository_link, markdown))
