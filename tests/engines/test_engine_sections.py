"""Engines take the config's typed sections (pipeline.config.Qwen, Browser, Router), and import
neither the config nor the project's files: the workspace hands them their section."""

from __future__ import annotations

import subprocess
import sys

from project_files import write_config

from pipeline.config import Browser, Qwen, Router, load
from pipeline.engines.qwen.display import plan_display
from pipeline.engines.qwen.engine import QwenEngine
from pipeline.engines.router import RouterEngine
from pipeline.wiring import engines as wired


def test_engines_read_their_typed_sections():
    qwen = QwenEngine(Qwen(base_url="http://127.0.0.1:9/", stable_reads=4), Browser(profile_dir="p"))
    assert (qwen.base_url, qwen.stable_reads, qwen.collect_from) == ("http://127.0.0.1:9", 4, "api")
    assert qwen.session.config.profile_dir == "p"
    router = RouterEngine(Router(model="test/model", max_retries=2), env={})
    assert (router.model, router.max_retries) == ("test/model", 2)
    assert plan_display(Browser(cdp_url="http://127.0.0.1:9222")).use == "attached"


def test_each_account_engine_gets_its_own_browser_section(tmp_path):
    config = load(write_config(tmp_path, "[accounts.main]\n[accounts.spare]\n[qwen]\nstable_reads = 2\n"))
    with wired(config) as engines:
        spare = engines.chat("spare").session.config
        assert isinstance(spare, Browser)
        assert spare.storage_state == str(tmp_path / ".qwenpipe/accounts/spare/state.json")
        assert engines.chat("main").stable_reads == 2


def test_engines_import_neither_the_config_nor_the_files():
    code = (
        "import sys, pipeline.engines.qwen.engine, pipeline.engines.router\n"
        "print(sorted(m for m in ('pipeline.config', 'pipeline.files') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
