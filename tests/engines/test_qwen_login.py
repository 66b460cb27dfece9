"""The one login check's verdicts on hand-made reads (no browser): what login, doctor and the
engine each conclude from the same LoginSeen."""

from __future__ import annotations

from pipeline.engines.base import HardError, TransientError
from pipeline.engines.qwen.login import LoginSeen

BASE = "https://chat.qwen.ai"


def test_the_site_saying_logged_out_stops_a_send_and_reads_logged_out():
    seen = LoginSeen(url=BASE + "/", status=False)
    blocker = seen.send_blocker()
    assert isinstance(blocker, HardError) and blocker.code == "logged_out"
    assert "qwenpipe login" in str(blocker) and not seen.logged_in(BASE) and seen.definite


def test_without_an_answer_from_the_site_the_page_decides():
    assert LoginSeen(url=BASE + "/c/1").logged_in(BASE)
    assert not LoginSeen(url=BASE + "/auth?action=signin").logged_in(BASE)
    assert not LoginSeen(url=BASE + "/", login_form=True).logged_in(BASE)
    assert not LoginSeen(url="https://elsewhere.example/").logged_in(BASE)
    assert LoginSeen(url=BASE + "/").send_blocker() is None and not LoginSeen(url=BASE + "/").definite


def test_a_firewall_or_bot_check_on_the_status_api_is_what_stops_the_send():
    waf = TransientError("the site answered with its firewall (WAF) page", code="waf")
    assert LoginSeen(url=BASE + "/", status=True, refusal=waf).send_blocker() is waf
    assert LoginSeen(url=BASE + "/", status=True).send_blocker() is None
