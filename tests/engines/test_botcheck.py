"""The bot check whatever its form (engines/qwen/botcheck.py): which addresses are the site's
verification, what a send answered with neither the stream nor JSON means, and which such
replies prove the site took nothing. The browser paths: tests/integration/test_bot_check_shapes_cli.py."""

from __future__ import annotations

import pytest

from pipeline.engines.base import HardError, TransientError
from pipeline.engines.qwen.botcheck import foreign_reply, is_sign_in, is_verification, names_verification
from pipeline.engines.qwen.page import failure_in
from pipeline.simulator.botchecks import QR_DENY_PAGE
from pipeline.simulator.pages import WAF_PAGE

SITE = "https://chat.qwen.ai"
VERIFICATION = [
    "/_____tmd_____/punish?x5secdata=abc&action=captchaconnect",
    "/_____tmd_____/punish?x5secdata=abc&action=captcha",
    "/_____tmd_____/punish?x5secdata=abc&action=qrcode",
    "/punish?x5step=1",
    "/captcha/verify",
    "/auth/verify?x5secdata=abc",
    "/auth/risk/step2",
]
NOT_VERIFICATION = ["/", "/c/0f2b3c4d-1111-2222-3333-444455556666", "/auth?action=signin", "/auth", "/auth/"]


@pytest.mark.parametrize("path", VERIFICATION)
def test_every_verification_address_is_a_bot_check_whatever_the_page_draws(path):
    assert is_verification(SITE + path)
    error = failure_in({"url": SITE + path, "title": "", "text": ""})
    assert isinstance(error, HardError) and error.code == "bot_check"


@pytest.mark.parametrize("path", NOT_VERIFICATION)
def test_the_chat_and_the_sign_in_page_are_not_verification(path):
    assert not is_verification(SITE + path)
    assert is_sign_in(SITE + path) == path.startswith("/auth")


def test_the_sign_in_page_is_still_logged_out_not_a_bot_check():
    error = failure_in({"url": SITE + "/auth?action=signin", "title": "", "text": ""})
    assert error.code == "logged_out"


def test_the_connect_puzzle_is_known_by_its_words_on_any_address():
    error = failure_in({"url": SITE + "/", "title": "Security check", "text": "Please connect them in order"})
    assert error.code == "bot_check"


@pytest.mark.parametrize(
    "body, location",
    [
        (
            '<script>window.location.replace("/_____tmd_____/punish?x5secdata=1&action=captchaconnect")</script>',
            "",
        ),
        (QR_DENY_PAGE, ""),
        ('{"ret": ["FAIL_SYS_USER_VALIDATE"]} as text', ""),
        ("", "/auth/verify?x5secdata=1"),
        ("", "https://chat.qwen.ai/_____tmd_____/punish?x5secdata=1"),
    ],
)
def test_a_reply_that_names_the_check_proves_the_site_took_nothing(body, location):
    assert names_verification(body, location)
    error = foreign_reply("text/html", body, location)
    assert isinstance(error, HardError) and error.code == "bot_check"


@pytest.mark.parametrize(
    "body, location",
    [
        ("<html><body>502 Bad Gateway</body></html>", ""),  # a page of unknown meaning: in doubt
        ("<html><body><p>Please wait a moment.</p></body></html>", ""),
        ("", "/c/0f2b3c4d-1111-2222-3333-444455556666"),
        ("", "?"),  # a redirect that said nowhere
    ],
)
def test_a_foreign_reply_that_does_not_name_the_check_is_a_bot_check_in_doubt(body, location):
    assert not names_verification(body, location)
    assert foreign_reply("text/html", body, location).code == "bot_check"


def test_the_firewall_page_stays_the_firewall_and_proves_nothing():
    assert not names_verification(WAF_PAGE + "/punish?", "")
    error = foreign_reply("text/html", WAF_PAGE)
    assert isinstance(error, TransientError) and error.code == "waf"


def test_a_read_of_ours_redirected_to_a_verification_page_is_a_bot_check():
    from pipeline.engines.qwen.page import refusal_in

    assert (
        refusal_in("<html>Security verification</html>", "https://chat.qwen.ai/auth/verify?x=1").code
        == "bot_check"
    )
    assert refusal_in("<html>Security verification</html>", "https://chat.qwen.ai/api/v2/chats/") is None
    assert refusal_in(WAF_PAGE, "https://chat.qwen.ai/auth/verify").code == "waf"
