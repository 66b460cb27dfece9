from __future__ import annotations

import pytest
from sim_project import journal, make_project, prompt
from tests_cli_helpers import qwenpipe_in_process

pytestmark = pytest.mark.browser
SIMULATOR = {"answer_seconds": 0.0, "thinking_seconds": 0.0, "url_delay": 0.2}


@pytest.mark.parametrize("seed", range(1, 13))
def test_scratch(sim, tmp_path, seed):
    project = make_project(tmp_path, sim, router=False)
    config = project / "config.toml"
    config.write_text(config.read_text().replace("page_timeout = 15", "page_timeout = 5"))
    text = prompt(project, "tea", f"Write about tea, seed {seed}.")
    sim.set(fuzz=seed, fuzz_rate=0.35)
    codes = []
    try:
        for _ in range(8):
            r = qwenpipe_in_process("generate", "tea", cwd=project)
            codes.append(r.returncode)
            assert "Traceback" not in r.stderr, r.stderr
            if r.returncode in (0, 1):
                break
    finally:
        sim.set(fuzz=None)
    taken = [e for e in sim.ledger() if e["prompt"] == text and e["accepted"]]
    faults = [f for f in sim.faults()]
    print(seed, codes, len(taken), [(f["step"], f["kind"], f["detail"]) for f in faults[-6:]])
    print(
        [
            (e["event"], e.get("where"), e.get("seen", "")[:80])
            for e in journal(project)
            if e["event"] in ("unknown_answer", "hold", "recovery_in_doubt", "transient", "hard")
        ]
    )
    assert len(taken) <= 1
