"""Which screen a browser launch uses (browser.display), decided without starting anything."""

from __future__ import annotations

import pytest

from pipeline.config import Browser
from pipeline.engines.qwen.display import no_display_message, plan_display

SCREEN = {"DISPLAY": ":7"}


@pytest.mark.parametrize(
    ("browser", "env", "use"),
    [
        ({"headless": True, "display": "xvfb"}, {}, "headless"),
        ({"headless": False, "cdp_url": "http://127.0.0.1:9222"}, {}, "attached"),
        ({"headless": False, "display": "auto"}, SCREEN, "screen"),
        ({"headless": False, "display": "none"}, SCREEN, "screen"),
        ({"headless": False, "display": "xvfb"}, SCREEN, "xvfb"),
        ({"headless": False, "display": "auto"}, {}, "xvfb"),
        ({"headless": False, "display": "none"}, {}, "missing"),
    ],
)
def test_a_headed_launch_without_a_screen_gets_an_xvfb_unless_display_is_none(browser, env, use):
    assert plan_display(Browser(**browser), env, "linux").use == use


def test_without_xvfb_installed_the_message_names_the_apt_line(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    plan = plan_display(Browser(headless=False, display="auto"), {}, "linux")
    assert plan.use == "missing" and plan.xvfb is None
    assert "apt-get install -y xvfb" in no_display_message(plan)
