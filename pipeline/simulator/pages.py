"""The HTML the simulator serves: the app shell, the sign-in page, and the pages that replace the
app when something is wrong (Aliyun WAF, bot check)."""

from __future__ import annotations

import json
from pathlib import Path

from .chats import BX_V, PAGE_SETTLE
from .settings import MODELS, Settings

STATIC = Path(__file__).parent / "static"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}

# What an Aliyun WAF interstitial looks like to a scraper: no app, a marker script name.
WAF_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>405</title>
<meta name="aliyun_waf_aa" content="block"></head>
<body><div id="aliyun_waf_aa_wrapper"><p>Sorry, your request has been blocked as it may cause
potential threats to the server's security.</p></div></body></html>
"""

BOT_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Verification</title></head>
<body><div class="captcha-container" id="nocaptcha">
<p>Please complete the operation to verify that you are a real person</p>
<div class="nc_wrapper"><span class="nc_iconfont btn_slide">&gt;&gt;</span></div>
</div></body></html>
"""

# The late-2026 slider (Alibaba's "nc" captcha), as the overlay's iframe shows it: a handle that,
# dragged or clicked, reports to the site and lets the account send again.
SLIDER_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Verification</title>
<style>#nc_1__scale_text{width:300px;height:34px;background:#e8e8e8;position:relative}
#nc_1_n1z{position:absolute;left:0;top:0;width:40px;height:34px;background:#fff;border:1px solid #ccc;
cursor:pointer}</style></head>
<body><div id="nocaptcha" class="nc-container">
<p>Please slide to verify</p>
<div id="nc_1__scale_text" class="nc_scale">
<span id="nc_1_n1z" class="nc_iconfont btn_slide">&gt;&gt;</span></div>
<p id="nc_done" hidden>Verified</p>
</div>
<script>
(function () {
  var handle = document.getElementById("nc_1_n1z"), sent = false;
  function solve() {
    if (sent) return;
    sent = true;
    fetch("/_____tmd_____/slide", {method: "POST", credentials: "include", body: "{}"}).then(function () {
      document.getElementById("nc_done").hidden = false;
      if (window.parent !== window) window.parent.postMessage("qwen-sim-slider-solved", "*");
      else location.href = "/";
    });
  }
  handle.addEventListener("click", solve);
  handle.addEventListener("mouseup", solve);
})();
</script></body></html>
"""


def app_page(settings: Settings) -> str:
    """The single-page app; the run's UI generation, URL delay and toast time are baked into the page."""
    config = {
        "ui": settings.ui,
        "url_delay": settings.url_delay,
        "toast_seconds": settings.toast_seconds,
        "settle_ms": round(PAGE_SETTLE * 1000),
        "models": [{"id": model, "name": name} for model, name in MODELS],
        # The frontend's build and its anti-bot script's version, as a real bundle has them.
        "version": settings.frontend_version,
        "bx_v": BX_V,
        "rotating": settings.rotating_sessions,  # renew the session on load (sessions.py)
        # Late autumn 2026: the page loads only the chat's last page of messages, over XHR.
        "history_limit": settings.history_limit,
        "candidates": settings.candidates,
    }
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    return html.replace("__SIM_CONFIG__", json.dumps(config))


def login_page() -> str:
    return (STATIC / "auth.html").read_text(encoding="utf-8")


def static_file(name: str) -> tuple[bytes, str] | None:
    """A file from static/ by bare name (no folders: nothing outside static/ can be read)."""
    if "/" in name or "\\" in name or name.startswith("."):
        return None
    path = STATIC / name
    if not path.is_file():
        return None
    return path.read_bytes(), CONTENT_TYPES.get(path.suffix, "application/octet-stream")
