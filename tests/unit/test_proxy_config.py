"""browser.proxy and [accounts.NAME] proxy: parsed once (pipeline.proxy), checked with clear
errors that never show the password, handed to the account's browser, and masked everywhere."""

from __future__ import annotations

import pytest

from pipeline import redact
from pipeline.accounts import account_config, account_named, all_accounts
from pipeline.config import ConfigError, load, render_default_config
from pipeline.proxy import parse
from pipeline.setup.login import account_browser
from pipeline.wiring import workspace as open_workspace

SECRET = "pa%40ss-Word-42"  # percent-encoded: the password itself is pa@ss-Word-42


def _load(tmp_path, text: str):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load(path)


def test_a_proxy_url_gives_chromium_the_server_and_playwright_the_login():
    proxy = parse(f"http://alice:{SECRET}@proxy.example:8080")
    assert proxy.playwright() == {
        "server": "http://proxy.example:8080",
        "username": "alice",
        "password": "pa@ss-Word-42",
    }
    assert proxy.shown == "http://proxy.example:8080 (user alice)" and "pa" not in proxy.shown
    assert set(proxy.secrets) == {SECRET, "pa@ss-Word-42"}
    assert parse("socks5://10.0.0.1:1080").playwright() == {"server": "socks5://10.0.0.1:1080"}
    assert parse("HTTPS://[::1]:3128").server == "https://[::1]:3128"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (f"ftp://u:{SECRET}@h:21", "must start with http://, https://, socks5://"),
        (f"socks4://u:{SECRET}@h:1080", "must start with"),
        (f"http://u:{SECRET}@:8080", "names no host"),
        (f"http://u:{SECRET}@proxy.example", "names no port"),
        (f"http://u:{SECRET}@proxy.example:99999", "is not a proxy URL"),
        (f"http://u:{SECRET}@proxy.example:8080/path", "must be only scheme://"),
        (f"socks5://u:{SECRET}@proxy.example:1080", "SOCKS5 proxy with a login, which Chromium cannot use"),
        ("proxy.example:8080", "must start with"),
    ],
)
def test_a_bad_proxy_is_exit_2_naming_the_key_and_never_the_password(tmp_path, url, message):
    for table, key in (("[browser]", "browser.proxy"), ("[accounts.main]", "accounts.main.proxy")):
        with pytest.raises(ConfigError) as info:
            _load(tmp_path, f'{table}\nproxy = "{url}"\n')
        text = str(info.value)
        assert key in text and message in text, text
        assert "pa%40ss" not in text and "pa@ss" not in text


def test_a_proxy_must_be_a_string(tmp_path):
    with pytest.raises(ConfigError, match=r"browser\.proxy must be a string"):
        _load(tmp_path, "[browser]\nproxy = 8080\n")


def test_browser_proxy_beside_accounts_tables_is_refused_not_silently_unused(tmp_path):
    with pytest.raises(ConfigError, match=r"browser\.proxy .* \[accounts\.main\]: set proxy in each account"):
        _load(tmp_path, '[browser]\nproxy = "http://h:1"\n[accounts.main]\n')


def test_a_proxy_with_an_attached_browser_is_refused_from_the_file_and_from_cdp(tmp_path):
    with pytest.raises(ConfigError, match=r"browser\.proxy is set, but browser\.cdp_url"):
        _load(tmp_path, '[browser]\nproxy = "http://h:1"\ncdp_url = "http://127.0.0.1:9222"\n')
    config = _load(tmp_path, '[accounts.main]\n[accounts.spare]\nproxy = "http://h:1"\n')
    with pytest.raises(ConfigError, match=r"--cdp: accounts\.spare\.proxy is set, but .*--proxy-server"):
        config.with_override("browser", "cdp_url", "http://127.0.0.1:9222", "--cdp")


def test_each_account_gets_its_own_proxy_and_only_its_own(tmp_path):
    config = _load(tmp_path, f'[accounts.main]\nproxy = "http://alice:{SECRET}@h:8080"\n[accounts.spare]\n')
    main, spare = all_accounts(config)
    assert main.proxy == f"http://alice:{SECRET}@h:8080" and spare.proxy == ""
    assert account_config(config, main).browser.proxy == main.proxy
    assert account_config(config, spare).browser.proxy == ""
    assert account_browser(config, account_named(config, "main")).proxy == main.proxy
    alone = _load(tmp_path, '[browser]\nproxy = "socks5://127.0.0.1:1080"\n')
    assert all_accounts(alone)[0].proxy == "socks5://127.0.0.1:1080"


def test_the_workspace_registers_every_proxy_password_for_masking(tmp_path):
    line = f"net::ERR_PROXY at http://alice:{SECRET}@h:8080 (pa@ss-Word-42)"
    # Before: nobody knows the bare password is a secret (a URL's login is masked by its shape).
    assert redact.mask(line) == f"net::ERR_PROXY at http://alice:{redact.MASK}@h:8080 (pa@ss-Word-42)"
    open_workspace(_load(tmp_path, f'[accounts.main]\nproxy = "http://alice:{SECRET}@h:8080"\n'))
    masked = redact.mask(line)
    assert "pa%40ss" not in masked and "pa@ss" not in masked and masked.count(redact.MASK) == 2
    assert redact.mask("the proxy said: ss-Word-42.") == f"the proxy said: {redact.MASK}."  # a piece


def test_init_writes_the_proxy_keys_commented():
    text = render_default_config()
    browser = text.split("[browser]", 1)[1].split("\n[", 1)[0]
    assert '\nproxy = ""' in browser
    assert '# proxy = ""' in text.split("# [accounts.main]", 1)[1]
