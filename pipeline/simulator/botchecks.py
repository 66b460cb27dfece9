"""The bot check's later shapes (docs/qwen-site.md, "Bot checks"), as the simulator plays them.

Each is a scenario (`--scenario NAME`, or `[sim:NAME]` in one prompt) that refuses the send:
the prompt reaches the server (the ledger says so, accepted: false) and nothing is generated.
- `punish_page`: the send is answered HTTP 200 with an HTML page (not JSON) whose script does
  `window.location.replace(".../_____tmd_____/punish?x5secdata=...&action=captchaconnect")`:
  the page leaves the chat for the connect-in-order puzzle.
- `connect_puzzle`: the send is answered with the check's JSON (as the slider's) naming
  `action=captchaconnect`: the page lays the puzzle over itself, "Please connect them in order"
  in a dialog, no slider handle.
- `qr_deny`: the send is answered HTTP 200 with the QR code deny page itself, which the page
  draws in place of the app (its address stays the chat's).
- `auth_redirect`: the send is redirected (302) to a page under /auth/ that is not the sign-in
  page; the page follows it there.

And one that does not refuse: `punish_after_send` takes the send (accepted: true, answered as
usual), and from then on the account meets the check everywhere (its risk score is high): every
page and API call of its is answered with the page that leaves for the puzzle, until the check
is solved (`solve_slider`) or the accounts are cleared.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple
from urllib.parse import parse_qs

PUNISH_PATH = "/_____tmd_____/punish"
AUTH_VERIFY_PATH = "/auth/verify"
PAGE_CHECKS = ("punish_page", "qr_deny", "auth_redirect")  # answered with a page, not the site's JSON
BOT_CHECK_SCENARIOS = (*PAGE_CHECKS, "connect_puzzle")  # each refuses the send
AFTER_SEND = "punish_after_send"  # takes the send, then checks everything the account does
VALIDATE_RET = [
    "FAIL_SYS_USER_VALIDATE",
    "RGV587_ERROR::SM::\u54ce\u54df\u5582,\u88ab\u6324\u7206\u5566,\u8bf7\u7a0d\u540e\u91cd\u8bd5",
]


class PageRefusal(NamedTuple):
    """A send refused with a page rather than JSON (one of PAGE_CHECKS)."""

    scenario: str


def punish_url(action: str) -> str:
    """A punish address as the site hands them out: its x5secdata differs each time."""
    return f"{PUNISH_PATH}?x5secdata={uuid.uuid4().hex}&action={action}"


def connect_body() -> dict:
    """The check's JSON naming the connect-in-order puzzle (the slider's shape, another action)."""
    return {"ret": list(VALIDATE_RET), "data": {"url": punish_url("captchaconnect")}}


def page_refusal(scenario: str) -> tuple[int, str, bytes, list[tuple[str, str]]]:
    """The HTTP answer to a send a page check refuses: (status, content type, body, headers)."""
    if scenario == "auth_redirect":
        where = f"{AUTH_VERIFY_PATH}?x5secdata={uuid.uuid4().hex}"
        return 302, "text/html; charset=utf-8", b"", [("Location", where)]
    html = (
        LEAVING_PAGE.replace("__URL__", punish_url("captchaconnect"))
        if scenario == "punish_page"
        else QR_DENY_PAGE
    )
    return 200, "text/html; charset=utf-8", html.replace("__X5__", uuid.uuid4().hex).encode(), []


def punish_page(query: str) -> str | None:
    """The page a punish address shows for its `action`, or None for the slider's own."""
    action = parse_qs(query).get("action", [""])[0]
    if action == "captchaconnect":
        return CONNECT_PAGE
    if action in ("qrcode", "deny"):
        return QR_DENY_PAGE.replace("__X5__", uuid.uuid4().hex)
    return None


# What the site answers the send with: a page whose script leaves the chat at once.
LEAVING_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title></title></head><body>
<script>window.location.replace("__URL__");</script>
</body></html>
"""

# The connect-in-order puzzle: a dialog of 375x665 with numbered dots, no slider handle.
CONNECT_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Security check</title>
<style>.puzzle-dialog{width:375px;height:665px;border:1px solid #ccc;position:relative}
.dot{position:absolute;width:36px;height:36px;border-radius:18px;background:#4a7;color:#fff;
text-align:center;line-height:36px}</style></head>
<body><div class="puzzle-dialog" role="dialog" aria-modal="true">
<p>Please connect them in order</p>
<span class="dot" style="left:60px;top:200px">1</span>
<span class="dot" style="left:250px;top:320px">2</span>
<span class="dot" style="left:120px;top:460px">3</span>
</div></body></html>
"""

# The QR code deny page: a further step of the check; its form names the punish address.
QR_DENY_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Access denied</title></head>
<body><div class="qr-deny">
<p>Access denied. Scan the QR code with the app to confirm it is you.</p>
<img class="qr-code" alt="QR code" width="160" height="160" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
<form method="post" action="/_____tmd_____/punish?x5secdata=__X5__&amp;action=qrcode">
<input type="hidden" name="x5secdata" value="__X5__"></form>
</div></body></html>
"""

# An unknown step under /auth/ (not the sign-in page): written into the app by its page, it
# takes the page to its own address.
AUTH_VERIFY_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Security verification</title></head>
<body><div class="auth-verify"><p>We need to verify this session before you go on.</p></div>
<script>
if (location.pathname !== "/auth/verify") window.location.replace("/auth/verify" + location.search);
</script>
</body></html>
"""
