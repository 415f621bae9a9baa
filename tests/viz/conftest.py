"""Shared by the viz tests: one headless Chromium for the whole run (skipped where there is none) and
MiniLM loaded once (the CLI's cached loader, shared with tests/cli)."""

import pytest

from attnkit.viz.browser import Browser, find_chromium

NO_CHROMIUM = ("needs Chromium for the browser tests (Debian: apt-get install chromium; "
               "see CONTRIBUTING.md)")


@pytest.fixture(scope="session")
def browser():
    if find_chromium() is None:
        pytest.skip(NO_CHROMIUM)
    with Browser() as b:
        yield b


@pytest.fixture
def open_page(browser):
    """open_page(path) -> a loaded tab; at teardown the test fails on any console error the page logged."""
    pages = []

    def go(path, **kw):
        page = browser.open(path, **kw)
        pages.append(page)
        return page

    yield go
    for page in pages:
        assert page.errors == [], f"console errors on {page}: {page.errors}"
        page.send("Page.close")


@pytest.fixture(scope="session")
def minilm():
    from attnkit.cli.pretrained import DEFAULT_MODEL, _model

    return _model(DEFAULT_MODEL)
