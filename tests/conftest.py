from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import FakeChat, FakeRouter
from project_files import add_prompt, snapshot, write_config  # noqa: F401 - re-exported for fixtures

from pipeline.config import load
from pipeline.contract.workspace import Engines, Workspace
from pipeline.wiring import workspace as open_workspace


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    """No test reads the developer's config or key, and every test runs in its own folder."""
    monkeypatch.delenv("QWENPIPE_CONFIG", raising=False)
    monkeypatch.delenv("ROUTER_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    # The secrets a test registers for masking are the process's: what one test registered
    # ("test", say) must not mask the next one's words.
    from pipeline import redact

    monkeypatch.setattr(redact, "_secrets", redact._secrets)


@pytest.fixture
def project(tmp_path) -> Path:
    """A project folder: config.toml (no poll spacing), prompts/, articles/."""
    write_config(tmp_path, "[qwen]\npoll_interval = 0\nmax_attempts = 3\n[article]\nmin_words = 0\n")
    (tmp_path / "prompts").mkdir()
    (tmp_path / "articles").mkdir()
    return tmp_path


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file of the user's outside the project (tmp_path/precious.txt, "the user's own file\n"),
    which nothing may change."""
    target = tmp_path / "precious.txt"
    target.write_text("the user's own file\n")
    return target


@pytest.fixture
def workspace(project) -> Iterator[Workspace]:
    with open_workspace(load(project / "config.toml")) as opened:
        yield opened


@pytest.fixture
def chat() -> FakeChat:
    return FakeChat()


@pytest.fixture
def router() -> FakeRouter:
    return FakeRouter()


@pytest.fixture
def engines(workspace, chat, router) -> Engines:
    return Engines(workspace.config, chat_factory=lambda _c: chat, router_factory=lambda _c: router)


@pytest.fixture(scope="module")
def module_sim(request):
    """One simulator for a whole test module, started with the module's SIMULATOR settings (a
    dict of Simulator arguments; none: the simulator's defaults). Tests ask for `sim`."""
    from pipeline.simulator import Simulator

    with Simulator(port=0, **{**test_site(), **getattr(request.module, "SIMULATOR", {})}).start() as server:
        yield server


def test_site() -> dict:
    """The settings of the site the suite runs against: QWENPIPE_TEST_SITE names one of the
    simulator's SITES (README: the suite against the late-2026 site); the page as last seen live
    without it. A module's own SIMULATOR settings win."""
    from pipeline.simulator.settings import SITES

    name = os.environ.get("QWENPIPE_TEST_SITE") or "live-2026-08"
    if name not in SITES:
        raise pytest.UsageError(f"QWENPIPE_TEST_SITE={name!r}: choose one of {', '.join(SITES)}")
    return SITES[name]


@pytest.fixture
def sim(module_sim, request):
    """The module's simulator with every setting back at the module's SIMULATOR (or the
    simulator's default) before each test: what one test changed never reaches the next."""
    module_sim.set(**sim_settings(getattr(request.module, "SIMULATOR", {})))
    return module_sim


@pytest.fixture
def fuzzed_sim(sim, request):
    """The module's simulator in its fuzzing mode (pipeline/simulator/fuzz.py): seeded by the
    environment's QWENPIPE_FUZZ_SEED (0 without it) at the module's FUZZ_RATE (the simulator's
    default without it). The seed and the faults met are printed, so a failure shows what to
    rerun; a test forces one fault instead with `sim.set(fault="STEP:KIND")`."""
    from pipeline.simulator.settings import DEFAULT_RATE

    seed = int(os.environ.get("QWENPIPE_FUZZ_SEED", "0"))
    sim.set(fuzz=seed, fuzz_rate=getattr(request.module, "FUZZ_RATE", DEFAULT_RATE))
    met = len(sim.faults())
    yield sim
    faults = [f"{f['step']}:{f['kind']} ({f['detail']})" for f in sim.faults()[met:]]
    print(f"fuzz seed {seed} (QWENPIPE_FUZZ_SEED={seed} reruns it): {', '.join(faults) or 'no fault met'}")
    sim.set(fuzz=None)


def sim_settings(chosen: dict) -> dict:
    """Every run-time setting of the simulator: `chosen`'s where it names one, else the default
    (the fuzzing mode's too: off, none forced)."""
    from dataclasses import asdict

    from pipeline.simulator.settings import DEFAULT_RATE, Settings

    defaults = {**asdict(Settings()), **test_site()}
    defaults.pop("frontend_version")  # the run's own build stays (a test may release a new one)
    defaults.update(fuzz=None, fuzz_rate=DEFAULT_RATE, fault="")
    return {**defaults, **{key: value for key, value in chosen.items() if key in defaults}}


os.environ.setdefault("NO_COLOR", "1")


@pytest.fixture(autouse=True)
def _own_browser(request, monkeypatch):
    """A module with OWN_BROWSER = True has its projects launch their own browser (see
    tests/sim_project.make_project); the others attach to the shared one."""
    if getattr(request.module, "OWN_BROWSER", False):
        import sim_project

        monkeypatch.setattr(sim_project, "OWN_BROWSER", True)


@pytest.fixture(scope="session", autouse=True)
def _shared_browser_stopped():
    """The shared Chromium the CLI tests attach to (tests/shared_browser.py), if one was started,
    stops with the test process."""
    yield
    import shared_browser
    import tests_cli_helpers

    tests_cli_helpers.release_driver()
    shared_browser.stop()


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL server for this test session (one per xdist worker), stopped after."""
    from pg_server import PostgresServer

    with PostgresServer() as server:
        yield server


def pytest_collection_modifyitems(items):
    """The crash and concurrency runs (marker `chaos`, minutes each) first: spread over the
    workers at the start, they run beside everything else instead of alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("chaos") is None)
