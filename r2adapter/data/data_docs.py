"""Great Expectations Data Docs: the HTML site the validation checkpoint writes
(`reports/data_docs/<dataset>/index.html`), and one self-contained page of the same results
(`validation.html`) for the Kubeflow UI, which shows an HTML artifact from a single file:
there the site's links between its pages would lead nowhere."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SITE = "r2a"  # the data docs site's name in the (ephemeral) data context
PAGE = "validation.html"
# what a build writes into its folder; nothing else there is touched
WRITTEN = ("index.html", "expectations", "validations", "static", PAGE)


def default_folder(dataset: str) -> Path:
    """Where `r2a data validate` writes a dataset's site: reports/data_docs/<dataset>/."""
    from r2adapter.config import settings

    return settings().root / "reports" / "data_docs" / dataset


def site_config(folder: Path) -> dict[str, Any]:
    """A local site in `folder` (an absolute path: the context's root is a temporary one)."""
    return {
        "class_name": "SiteBuilder",
        "show_how_to_buttons": False,
        "store_backend": {
            "class_name": "TupleFilesystemStoreBackend",
            "base_directory": str(folder.resolve()),
        },
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
    }


def clear(folder: Path) -> None:
    """Remove an earlier build: the index lists only this context's results, so the pages of
    earlier runs would stay beside it, unlisted, one more folder per run."""
    for name in WRITTEN:
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def single_page(title: str, results: Sequence[Any]) -> str:
    """Every suite's validation result (GE `ExpectationSuiteValidationResult`s) on one page,
    drawn by the renderer and view the site's validation pages use; its styles are inline."""
    from great_expectations.render.components import RenderedDocumentContent
    from great_expectations.render.renderer.page_renderer import ValidationResultsPageRenderer
    from great_expectations.render.view import DefaultJinjaPageView

    renderer = ValidationResultsPageRenderer()
    sections = [s for r in results for s in renderer.render(r).sections]
    document = RenderedDocumentContent(
        renderer_type="ValidationResultsPageRenderer",
        page_title=title,
        expectation_suite_name=title,
        sections=sections,
        utm_medium="validation-results-page",
    )
    return str(DefaultJinjaPageView().render(document, show_how_to_buttons=False))
