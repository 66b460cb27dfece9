from __future__ import annotations

import pytest
import shared_browser
from browser_helpers import browser_config

from pipeline.config import Qwen
from pipeline.engines.qwen.browser import BrowserSession
from pipeline.engines.qwen.engine import QwenEngine


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """One headless browser session for a whole test module (it launches on first use): the
    headless shell of the same Chromium where it is installed (tests/shared_browser.py), as the
    engine's reading of a page is the point here, not the browser's launch."""
    shell = shared_browser.headless_shell()
    changes = {"executable": shell} if shell else {}
    with BrowserSession(browser_config(tmp_path_factory.mktemp("browser"), **changes)) as shared:
        yield shared


@pytest.fixture
def engine(sim, session):
    """A QwenEngine on the module's simulator, in the module's browser session."""
    qwen = Qwen(base_url=sim.base_url, stable_reads=2, page_timeout=15)
    return QwenEngine(qwen, session)
