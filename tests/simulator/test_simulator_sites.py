"""`qwenpipe simulate --site NAME` (and QWENPIPE_TEST_SITE for the suite): the site as it stood
at a time docs/qwen-site.md describes, as settings over the defaults; an option given on its own
wins over the site's."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from pipeline.errors import UsageProblem
from pipeline.simulator import Simulator
from pipeline.simulator.__main__ import parse_args
from pipeline.simulator.options import SimulatorOptions
from pipeline.simulator.settings import SITES, Settings


@pytest.mark.parametrize("name", sorted(SITES))
def test_every_site_is_valid_settings_that_differ_from_the_defaults(name):
    settings = {**asdict(Settings()), **SITES[name]}
    Settings(**settings).validated()  # raises on a value the simulator refuses
    assert set(SITES[name]) <= set(asdict(Settings())), "a site names a setting the simulator lacks"
    assert all(asdict(Settings())[key] != value for key, value in SITES[name].items()), name


def test_the_site_option_sets_what_the_site_names_but_options_given_win():
    assert parse_args([]).site_settings() == {}  # the page as last seen live: the defaults
    late = parse_args(["--site", "late-2026"]).site_settings()
    assert late == SITES["late-2026"] and late["ui"] == "studio-2026-09"
    own_ui = parse_args(["--site", "late-2026", "--ui", "legacy"]).site_settings()
    assert "ui" not in own_ui and own_ui["history_limit"] == SITES["late-2026"]["history_limit"]
    with pytest.raises(UsageProblem, match="--site 'autumn'"):
        SimulatorOptions(site="autumn").checked()


def test_a_started_simulator_serves_the_site_it_was_given():
    options = parse_args(["--site", "late-2026", "--port", "0", "--answer-seconds", "0"])
    sim = options.checked().start()
    try:
        settings = sim.store.settings
        assert settings.ui == "studio-2026-09" and settings.late_stream and settings.history_limit == 10
    finally:
        sim.stop()
    assert Simulator(port=0).store.settings.ui != "studio-2026-09"
