"""`qwenpipe doctor`: is this machine ready to run unattended? One line per check, with the fix.

Checks, in order: the config; the browser (which, which version); for each account its profile
folder and saved login (present, private, its expiry), or that it is disabled, and its proxy
(reached, and for an http:// one its login accepted); each enabled
account logged in to qwen.base_url (through a real page and the site's `/api/v2/users/status`);
every selector of the chat page, by name (how a user learns the site changed); the router
(`/api/health`, `/v1/models`, router.model listed); the prompts folder there; the articles
folder writable; [notify] URLs Apprise understands (nothing sent) and the [metrics] folder
writable. One browser at a time (one per enabled account), each closed before the next.

With `[accounts.*]` tables each account's checks carry its name ("login (main)"); without,
the one account `default` is [browser]'s and the checks are named as they always were.

Statuses: ok, warn (works, but look), fail (will not work), skip (not applicable or not
checkable here). The exit code is 0 unless something failed.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..accounts import Account, all_accounts
from ..config import Browser, Config, ConfigError
from ..engines.base import Code
from ..engines.qwen.browser import INSTALL_HINT, find_executable, playwright_driver
from ..engines.qwen.login import read_settled_login_state
from ..exitcodes import ExitCode
from ..redact import first_line
from ..signin.profile import browser_session
from ..signin.saved import login_command, state_token_expiry
from ..times import describe_expiry
from .login import account_browser, state_key

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
EXPIRY_WARN_SECONDS = 2 * 86400
SCHEMA_VERSION = 1
# Selectors a new-chat page must show; the others exist only while or after an answer runs,
# or are on the new-chat page as the controls below.
ON_NEW_CHAT = ("composer", "send_button")
WHEN_ANSWERING = "checked when an answer runs"
# Controls of the new-chat page used only for some settings (what needs each), with the other
# control that does the same job on another generation of the page.
CHOICE_CONTROLS = {
    "model_picker": "qwen.model",
    "thinking_select": 'qwen.thinking = "on" or "off"',
    "thinking_toggle": 'qwen.thinking = "on" or "off"',
    "mode_menu": "qwen.web_search = true",
}
ALTERNATIVE = {"thinking_select": "thinking_toggle", "thinking_toggle": "thinking_select"}
# Drawn only while a list is open (chat_item: once the account has chats).
IN_A_LIST = ("model_option", "thinking_option", "mode_item", "chat_item")
# The logged-in page's sidebar: never clicked, a sign that the page is the app.
SIDEBAR = ("new_chat", "user_menu")


@dataclass
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "fix": self.fix or None,
            **self.extra,
        }


@dataclass
class Report:
    config: str
    checks: list[Check] = field(default_factory=list)

    def add(self, name: str, status: str, detail: str, fix: str = "", **extra: Any) -> Check:
        check = Check(name, status, detail, fix, extra)
        self.checks.append(check)
        return check

    @property
    def ok(self) -> bool:
        return not any(c.status == FAIL for c in self.checks)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.DONE if self.ok else ExitCode.FAILED

    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.checks) for s in (OK, WARN, FAIL, SKIP)}

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA_VERSION,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "config": self.config,
            "counts": self.counts(),
            "checks": [c.to_json() for c in self.checks],
        }

    def text(self) -> str:
        width = max((len(c.name) for c in self.checks), default=0)
        lines = []
        for check in self.checks:
            mark = {OK: "OK", WARN: "WARN", FAIL: "FAIL", SKIP: "-"}[check.status]
            lines.append(f"{mark:<4}  {check.name:<{width}}  {check.detail}")
            if check.fix and check.status in (WARN, FAIL):
                lines.append(f"{'':<4}  {'':<{width}}  fix: {check.fix}")
        counts = self.counts()
        verdict = "all checks passed" if self.ok else f"{counts[FAIL]} check(s) failed"
        lines.append(
            f"\n{verdict} ({counts[OK]} ok, {counts[WARN]} warn, {counts[FAIL]} fail, {counts[SKIP]} skipped)"
        )
        return "\n".join(lines) + "\n"


def run_doctor(
    config: Config,
    *,
    now: float | None = None,
    progress: Callable[[str], None] | None = None,
    offline: bool = False,
) -> Report:
    """Every check against this config; never raises for what it finds (that is the report).
    `offline`: the checks of this machine alone, in a second or two: no browser is started and
    nothing is asked over the network, neither the chat, a proxy nor the router (what
    `qwenpipe report` bundles)."""
    now = time.time() if now is None else now
    report = Report(config.describe())
    step = progress or (lambda _message: None)
    check_config(report, config)
    attached = bool(config.browser.cdp_url)
    step("browser")
    # One Playwright driver for the whole run: asking where its Chromium lives and starting the
    # browser then cost one driver start, not two.
    with ExitStack() as driver:
        try:
            chromium = driver.enter_context(playwright_driver()).chromium
        except Exception:  # no driver starts: check_browser_found says what is missing
            chromium = None
        executable = check_browser_found(report, config, chromium)
        check_display(report, config)
        accounts = all_accounts(config)
        for account in accounts:
            check_profile(report, config, now, account)
            if not offline:
                check_proxy(report, config, account)
        if not offline:
            step("chat page")
            check_chat(report, config, executable, attached, accounts)
    if not offline:
        step("router")
        check_router(report, config)
    check_prompts(report, config)
    check_articles(report, config)
    check_notify(report, config)
    check_metrics(report, config)
    check_store(report, config, now)
    check_holds(report, config, now)
    check_unknown_answers(report, config, now)
    return report


# -- config, browser, files ----------------------------------------------------------------------


def check_config(report: Report, config: Config) -> None:
    from ..engines.qwen.selectors import SelectorError, merge_overrides

    if config.source is None:
        report.add("config", WARN, "no config.toml: built-in defaults", "write one with `qwenpipe init`")
    else:
        report.add("config", OK, f"{config.source} is valid")
    try:
        sets = merge_overrides(config.qwen.selectors)
    except SelectorError as err:
        report.add("config selectors", FAIL, str(err), "fix or remove that key in [qwen.selectors]")
        return
    if sets[0].name == "config":
        names = ", ".join(config.qwen.selectors)
        report.add(
            "config selectors",
            WARN,
            f"[qwen.selectors] replaces the built-in selectors ({names})",
            "remove [qwen.selectors] to go back to the built-in sets if the page checks below fail",
        )


def check_browser_found(
    report: Report, config: Config, chromium: Any = None
) -> tuple[str | None, str] | None:
    """Which browser would start (no start yet); its version from `--version` when it is a file."""
    from ..engines.base import EngineError

    cdp = config.browser.cdp_url
    if cdp:
        report.add("browser", OK, f"attached over CDP ({cdp}); version read from the page below")
        return None
    try:
        path, description = find_executable(config.browser.executable, chromium=chromium)
    except EngineError as err:
        report.add("browser", FAIL, str(err), INSTALL_HINT)
        return None
    version = browser_version(path) if path else None
    detail = f"{description}: {version}" if version else description
    report.add("browser", OK, detail, path=path, version=version)
    return path, description


def check_display(report: Report, config: Config) -> None:
    """Which screen a run's browser will use (browser.display), and whether Xvfb is installed."""
    from ..engines.qwen.display import XVFB_INSTALL, no_display_message, plan_display

    plan = plan_display(config.browser)
    installed = f"Xvfb installed ({plan.xvfb})" if plan.xvfb else f"Xvfb not installed (`{XVFB_INSTALL}`)"
    detail = f'browser.display = "{plan.mode}": {plan.detail}; {installed}'
    extra = {"mode": plan.mode, "use": plan.use, "xvfb": plan.xvfb}
    if plan.use == "missing":
        report.add("display", FAIL, detail, no_display_message(plan), **extra)
    elif plan.xvfb is None and plan.mode != "none":
        fix = f"`{XVFB_INSTALL}` so that a headed run (browser.headless = false) works without a screen"
        report.add("display", OK, detail, fix, **extra)
    else:
        report.add("display", OK, detail, **extra)


def browser_version(path: str) -> str | None:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    line = (done.stdout or "").strip().splitlines()
    return line[0].strip() if done.returncode == 0 and line else None


def checked_as(name: str, account: Account) -> str:
    """A check's name for one account: as it always was for [browser]'s, else with the name."""
    return f"{name} ({account.name})" if account.configured else name


def check_profile(report: Report, config: Config, now: float, account: Account) -> None:
    """The account's profile folder (0700) and saved login (0600, its expiry). A disabled
    account is reported as one, and its files are still checked: they hold a login all the same."""
    if not account.enabled:
        report.add(
            checked_as("account", account),
            SKIP,
            f"disabled (enabled = false in {account.where}): no new sends; its chats in flight wait",
            enabled=False,
        )
    if config.browser.cdp_url:
        if not account.configured:
            report.add("profile", SKIP, "attached over CDP: the browser keeps its own profile and login")
        return
    profile, state = account.profile_dir, account.storage_state
    login = f"run `{login_command(account)}`"
    name = checked_as("profile", account)
    if not profile.exists() and state.is_file():
        report.add(name, OK, f"{profile} will be made from the saved login on the first start")
    elif not profile.exists():
        report.add(name, WARN, f"{profile} does not exist yet (no login kept)", login)
    else:
        mode = _mode(profile)
        if mode & 0o077:
            report.add(
                name,
                FAIL,
                f"{profile} is mode {mode:04o}: others can read the login",
                f"chmod 700 {profile}",
            )
        else:
            report.add(name, OK, f"{profile} (mode {mode:04o})")
    name = checked_as("saved login", account)
    if not state.is_file():
        report.add(
            name,
            WARN,
            f"{state} does not exist ({state_key(account)})",
            f"{login} (or `{login_command(account)} --import FILE`)",
        )
        return
    mode = _mode(state)
    expires = state_token_expiry(state)
    when = describe_expiry(expires, now)
    if mode & 0o077:
        report.add(
            name,
            FAIL,
            f"{state} is mode {mode:04o}: others can read the login",
            f"chmod 600 {state}",
            expires_at=expires,
        )
    elif expires is not None and expires - now < EXPIRY_WARN_SECONDS:
        report.add(name, WARN, f"{state}: the token {when}", login, expires_at=expires)
    else:
        report.add(name, OK, f"{state} (mode {mode:04o}), token {when}", expires_at=expires)


def check_proxy(report: Report, config: Config, account: Account) -> None:
    """The account's proxy (none: no check), reached from here: its login is not shown."""
    from urllib.parse import urlsplit

    from ..proxy import parse, probe

    if not account.proxy:
        return
    proxy = parse(account.proxy)
    site = urlsplit(str(config.qwen.base_url))
    host = f"[{site.hostname}]" if ":" in (site.hostname or "") else site.hostname
    target = f"{host}:{site.port or (443 if site.scheme == 'https' else 80)}"
    found = probe(proxy, target, timeout=min(10.0, float(config.qwen.page_timeout)))
    fix = "" if found.ok else f"is the proxy running, and its URL and login right? ({account.where} proxy)"
    report.add(checked_as("proxy", account), OK if found.ok else FAIL, f"{proxy.shown}: {found.detail}", fix)


def check_prompts(report: Report, config: Config) -> None:
    from ..config import ConfigError
    from ..contract.prompts import list_slugs

    try:
        folder = config.require_prompts_dir()
    except ConfigError as missing:
        report.add("prompts", FAIL, str(missing), f"mkdir -p {config.prompts_dir} (or `qwenpipe init`)")
        return
    count = len(list_slugs(folder))
    report.add(
        "prompts", OK, f"{folder}: {count} prompt(s)" if count else f"{folder}: no prompts yet (SLUG.md)"
    )


def check_articles(report: Report, config: Config) -> None:
    folder = config.articles_dir
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".qwenpipe-doctor-"):
            pass
    except OSError as err:
        report.add(
            "articles",
            FAIL,
            f"{folder}: cannot write in {existing} ({err.strerror})",
            f"make {existing} writable for this user, or change paths.articles",
        )
        return
    if existing != folder:
        report.add("articles", OK, f"{folder} will be created on the first run ({existing} is writable)")
    else:
        report.add("articles", OK, f"{folder} is writable")


def check_notify(report: Report, config: Config) -> None:
    """[notify] urls: each one a URL Apprise can send to (parsed, nothing sent)."""
    urls = config.notify.urls
    if not urls:
        return
    import apprise

    from ..redact import scheme_only

    bad = [scheme_only(url) for url in urls if not apprise.Apprise().add(url)]
    if bad:
        report.add(
            "notify",
            FAIL,
            f"notify.urls: {len(bad)} of {len(urls)} not understood by Apprise ({', '.join(bad)})",
            "write each as Apprise documents it, e.g. ntfy://ntfy.sh/TOPIC or json://host:port/path",
        )
        return
    report.add("notify", OK, f"notify.urls: {len(urls)} URL(s) Apprise can send to (nothing sent)")


def check_metrics(report: Report, config: Config) -> None:
    """[metrics] textfile: its folder exists and this user may write there."""
    if not config.metrics.textfile:
        return
    path = config.resolve(config.metrics.textfile)
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".qwenpipe-doctor-"):
            pass
    except OSError as err:
        report.add(
            "metrics",
            FAIL,
            f"metrics.textfile: cannot write in {path.parent} ({err.strerror})",
            f"create {path.parent} and make it writable for this user (node_exporter reads it)",
        )
        return
    if not path.name.endswith(".prom"):
        report.add(
            "metrics",
            WARN,
            f"metrics.textfile: {path} does not end in .prom",
            "node_exporter reads *.prom only",
        )
        return
    report.add("metrics", OK, f"metrics.textfile: {path} is writable")


def check_store(report: Report, config: Config, now: float) -> None:
    """A batch several hosts share: its server is reachable, at this qwenpipe's schema, and no
    other host serves this host's accounts (an account name means one login everywhere)."""
    if not config.store.url:
        return
    from ..store.postgres import PostgresStore, shown_url
    from ..store.protocol import StoreError

    host = config.store.host
    try:
        with PostgresStore(config.store.url, host=host) as store:
            served = store.served()
    except StoreError as err:
        fix = "run `qwenpipe store init`" if "store init" in str(err) else "check store.url and the server"
        report.add("store", FAIL, str(err), fix)
        return
    mine = {a.name for a in all_accounts(config) if a.enabled}
    others = sorted(
        f"{s.account} (host {s.host})"
        for s in served.values()
        if s.account in mine and s.host != host and now - s.seen < config.store.lease_seconds * 4
    )
    detail = f"{shown_url(config.store.url)}: reachable, schema current; this host is {host}"
    if others:
        report.add(
            "store",
            WARN,
            f"{detail}; another host serves this host's accounts lately: {', '.join(others)}",
            "give each host's accounts their own names (or store.host_id must differ per host)",
        )
    else:
        report.add("store", OK, detail)


def check_holds(report: Report, config: Config, now: float) -> None:
    """Each account the chat stopped by a bot check or empty answers: a warning saying since when,
    until when and (a bot check) how to end it. Read from the store; nothing is created."""
    from ..store.protocol import StoreError
    from ..wiring import workspace as open_workspace

    try:
        with open_workspace(config) as workspace:
            if not workspace.has_store:
                return
            holds = [workspace.chat_quota.held(now, a.name) for a in all_accounts(config)]
    except (StoreError, ConfigError, OSError):
        return  # the store's own check (or the articles check) says what is wrong
    for hold in holds:
        if hold is None or hold.kind == "quota":
            continue
        account = next(a for a in all_accounts(config) if a.name == hold.account)
        fix = f"run `{login_command(account)}` on a desktop" if hold.kind == "bot check" else ""
        report.add(checked_as("hold", account), WARN, hold.words(), fix, until=hold.until)


def check_unknown_answers(report: Report, config: Config, now: float) -> None:
    """The answers of the site nobody has seen that the journal recorded in the last day
    (contract/unknown.py): a warning with the count per step and the newest one, never a
    failure (each cost at most a delay). Read from the store; nothing is created."""
    from ..contract.unknown import DAY, unknown_since
    from ..store.protocol import StoreError
    from ..wiring import workspace as open_workspace

    try:
        with open_workspace(config) as workspace:
            if not workspace.has_store:
                return
            seen = unknown_since(workspace.journal, now - DAY)
    except (StoreError, ConfigError, OSError):
        return  # the store's own check (or the articles check) says what is wrong
    if not seen.total or seen.newest is None:
        report.add("unknown answers", OK, "none in the last day")
        return
    per_where = ", ".join(f"{count} at {where}" for where, count in seen.counts.items())
    newest = seen.newest
    when = str(newest.get("time", ""))[:19].replace("T", " ")
    detail = (
        f"{seen.total} in the last day ({per_where}); the newest at {when}, {newest.get('where')} of "
        f"{newest.get('slug') or '-'} (account {newest.get('account') or '-'}): {newest.get('seen')}"
    )
    fix = "the site may have changed: `qwenpipe report SLUG` bundles them to send in"
    report.add("unknown answers", WARN, detail, fix, counts=seen.counts, newest=newest)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# -- the chat page -------------------------------------------------------------------------------


def check_chat(
    report: Report, config: Config, executable: Any, attached: bool, accounts: tuple[Account, ...]
) -> None:
    """A new-chat page per enabled account, one browser at a time: the version (when not
    known), each account's login, and each selector (on the first logged-in page)."""
    if executable is None and not attached:  # no browser found: nothing to open
        report.add("login", SKIP, "no browser to open the chat page with")
        _skip_selectors(report, "no browser")
        return
    # Attached over CDP there is one browser, the user's, with the one login it has.
    targets = accounts[:1] if attached else tuple(a for a in accounts if a.enabled)
    if not targets:
        report.add("login", SKIP, "every account is disabled (enabled = false): none to check")
        _skip_selectors(report, "needs a logged-in chat page")
        return
    why = "needs a logged-in chat page"
    for account in targets:
        name = "login" if attached else checked_as("login", account)
        browser = None if attached else account_browser(config, account)
        logged_in = _check_chat_page(report, config, executable, attached, browser, name, account)
        if logged_in is None:
            why = "the page did not open"
    if not any(c.name == "page" for c in report.checks):
        _skip_selectors(report, why)


def _check_chat_page(
    report: Report,
    config: Config,
    executable: Any,
    attached: bool,
    browser: Browser | None,
    name: str,
    account: Account,
) -> bool | None:
    """One browser on `browser` (a [browser] section; None: the config's own), one new-chat page:
    the version (once), the login as the check `name`, and the selectors unless they have been
    checked already. Whether it was logged in; None when the page did not open."""
    from playwright.sync_api import Error as PlaywrightError

    from ..engines.base import EngineError
    from ..engines.qwen.selectors import SelectorError, merge_overrides
    from ..errors import UsageProblem

    base_url = str(config.qwen.base_url).rstrip("/")
    timeout = float(config.qwen.page_timeout)
    try:
        selector_sets = merge_overrides(config.qwen.selectors)
    except SelectorError:
        selector_sets = ()
    session = browser_session(config, browser)
    try:
        page = session.new_page()
        page.set_default_timeout(timeout * 1000)
        versioned = any(c.name == "browser" and c.extra.get("version") for c in report.checks)
        if (attached or executable[0] is None) and not versioned:
            agent = page.evaluate("navigator.userAgent")
            version = next((p for p in agent.split() if "Chrome/" in p), agent)
            _add_version(report, version)
        page.goto(base_url + "/", wait_until="domcontentloaded")
        logged_in = check_login(report, page, base_url, timeout, name=name, login=login_command(account))
        if logged_in and selector_sets and not any(c.name == "page" for c in report.checks):
            selectors = check_selectors(report, page, selector_sets, timeout, needs=choice_needs(config))
            check_choices(report, page, selectors, config)
        return logged_in
    except (EngineError, PlaywrightError, UsageProblem) as err:  # UsageProblem: no screen, no Xvfb
        what = first_line(err)
        report.add(name, FAIL, f"could not open {base_url}: {what}", _open_fix(err, attached))
        return None
    finally:
        session.close()


def _add_version(report: Report, version: str) -> None:
    for check in report.checks:
        if check.name == "browser":
            check.detail = (
                f"{check.detail}: {version}"
                if "version read" not in check.detail
                else (check.detail.replace("version read from the page below", version))
            )
            check.extra["version"] = version


def _open_fix(err: BaseException, attached: bool) -> str:
    from ..engines.base import EngineBusy
    from ..errors import UsageProblem

    if isinstance(err, EngineBusy):
        return "a run is using the profile: run doctor again when it has finished"
    if isinstance(err, UsageProblem):
        return "see the display check above"
    if attached:
        return "is the browser at browser.cdp_url running with --remote-debugging-port?"
    return "check qwen.base_url and the network; browser.args for proxies"


def check_login(
    report: Report,
    page: Any,
    base_url: str,
    timeout: float,
    *,
    name: str = "login",
    login: str = "qwenpipe login",
) -> bool:
    """Logged in through the page: the site's status API, else the page itself (not /auth).
    `name`: the check's name (an account's: "login (main)"); `login`: the command that signs it in."""
    seen = read_settled_login_state(page, timeout)
    failure = _screen_problem(page)
    if failure:
        report.add(
            name,
            FAIL,
            f"{base_url}: {failure}",
            "try later, headed (browser.headless = false) "
            "or attached to your own Chrome (--cdp / browser.cdp_url)",
        )
        return False
    status, url = (seen.status, seen.url) if seen else (None, "")
    if seen and seen.logged_in(base_url):
        how = (
            "/api/v2/users/status says so"
            if status
            else "the page is the app (the status API did not answer)"
        )
        report.add(name, OK, f"logged in to {base_url} ({how})")
        return True
    why = "the site says logged out" if status is False else f"the page shows the sign-in form ({url})"
    if not seen:
        why = f"the page did not answer within {timeout:g} s"
    report.add(name, FAIL, f"not logged in to {base_url}: {why}", f"run `{login}`")
    return False


def _screen_problem(page: Any) -> str | None:
    """A bot check or firewall page instead of the app (logged-out screens are the login check's)."""
    from ..engines.qwen.page import screen_failure
    from ..engines.qwen.selectors import BUILT_IN

    try:
        failure = screen_failure(page, BUILT_IN)
    except Exception:
        return None
    if failure is None or getattr(failure, "code", "") == Code.LOGGED_OUT:
        return None
    return str(failure)


def choice_needs(config: Config) -> set[str]:
    """The controls of CHOICE_CONTROLS that config.toml's [qwen] settings need."""
    qwen = config.qwen
    needs = {"model_picker"} if qwen.model else set()
    if qwen.thinking != "auto":
        needs |= {"thinking_select", "thinking_toggle"}
    return needs | ({"mode_menu"} if qwen.web_search else set())


def check_selectors(
    report: Report, page: Any, selector_sets: tuple, timeout: float, *, needs: set[str] = frozenset()
) -> Any:
    """Which UI generation the page is, then every selector of it by name. `needs`: the controls
    of CHOICE_CONTROLS the config needs (missing: a failure; else only a note). Returns the
    selector set checked."""
    from ..engines.qwen.page import detect_ui, present
    from ..engines.qwen.selectors import BUILT_IN

    deadline = time.monotonic() + timeout
    # The app draws itself after load. A built-in UI drawn while [qwen.selectors] does not match
    # it is a mistake in config.toml: reported at once, not after the whole timeout.
    matched, built_in = detect_ui(page, selector_sets), detect_ui(page, BUILT_IN)
    while matched is None and built_in is None and time.monotonic() < deadline:
        page.wait_for_timeout(250)
        matched, built_in = detect_ui(page, selector_sets), detect_ui(page, BUILT_IN)
    tried = ", ".join(f"{s.name} ({s.composer})" for s in selector_sets)
    if matched is None:
        if built_in is not None:
            fix = f"the page is the built-in {built_in.name!r} UI: fix or remove [qwen.selectors]"
        else:
            fix = (
                "the site changed: find the elements in the browser's inspector and set them in "
                "[qwen.selectors] (then run doctor again)"
            )
        report.add("page", FAIL, f"no known UI on the new-chat page: no composer of {tried}", fix)
        selectors = selector_sets[0]
    else:
        report.add("page", OK, f"UI generation {matched.name!r} matched (tried: {tried})", ui=matched.name)
        selectors = matched
    named = selectors.named()
    found = dict(zip(named, present(page, list(named.values())), strict=True))
    for name, css in named.items():
        label = f"selector {name}"
        if name == "login":
            status = FAIL if found[name] else OK
            detail = f"{css}: {'shown' if found[name] else 'absent'} (it marks a logged-out page)"
            report.add(label, status, detail, "run `qwenpipe login`" if found[name] else "", selector=css)
        elif not css:
            report.add(label, SKIP, f"none in the {selectors.name!r} UI", selector=css)
        elif name in ON_NEW_CHAT:
            fix = f"the site changed: set qwen.selectors.{name} in config.toml to the element's CSS selector"
            report.add(
                label,
                OK if found[name] else FAIL,
                f"{css}: {'found' if found[name] else 'MISSING'}",
                "" if found[name] else fix,
                selector=css,
            )
        elif found[name]:
            report.add(label, OK, f"{css}: found", selector=css)
        elif name in CHOICE_CONTROLS:
            _missing_control(report, selectors, name, found, name in needs)
        elif name in IN_A_LIST:
            report.add(label, SKIP, f"{css}: checked when its list is open", selector=css)
        elif name in SIDEBAR:
            report.add(label, SKIP, f"{css}: not on this page (never clicked)", selector=css)
        else:
            report.add(label, SKIP, f"{css}: {WHEN_ANSWERING}", selector=css)
    return selectors


def check_choices(report: Report, page: Any, selectors: Any, config: Config) -> None:
    """config.toml's qwen.model, qwen.thinking and qwen.web_search set on the new-chat page, as a
    send sets them (nothing is typed or sent): what the page cannot do fails here, named."""
    from playwright.sync_api import Error as PlaywrightError

    from ..engines.base import ChatChoice, EngineError
    from ..engines.qwen.choices import apply_choice

    choice = ChatChoice.of(config.qwen)
    if choice == ChatChoice():
        return
    asked = f"qwen.model = {choice.model!r}, qwen.thinking = {choice.thinking!r}, qwen.web_search = "
    asked += "true" if choice.web_search else "false"
    try:
        apply_choice(page, selectors, choice)
    except (EngineError, PlaywrightError) as err:
        detail = first_line(err, limit=300)
        report.add("page choices", FAIL, detail, "change that setting or [qwen.selectors]")
        return
    report.add("page choices", OK, f"{asked}: set on the new-chat page")


def _missing_control(report: Report, selectors: Any, name: str, found: dict, needed: bool) -> None:
    """A control of CHOICE_CONTROLS the new-chat page does not show: nothing when the page has
    the other control for the job, a note when the config does not need it, else a failure."""
    css, other = getattr(selectors, name), ALTERNATIVE.get(name, "")
    if other and found.get(other):
        detail = f"{css}: not on this page, which has the {other.replace('_', ' ')} instead"
        report.add(f"selector {name}", SKIP, detail, selector=css)
    elif not needed:
        detail = f"{css}: not on this page (needed only for {CHOICE_CONTROLS[name]})"
        report.add(f"selector {name}", SKIP, detail, selector=css)
    else:
        fix = (
            f"set qwen.selectors.{name} in config.toml to the element's CSS selector, "
            f"or drop {CHOICE_CONTROLS[name]} from config.toml"
        )
        report.add(
            f"selector {name}",
            FAIL,
            f"{css}: MISSING, and config.toml sets {CHOICE_CONTROLS[name]}",
            fix,
            selector=css,
        )


def _skip_selectors(report: Report, why: str) -> None:
    report.add("page", SKIP, f"selectors not checked: {why}")


# -- router --------------------------------------------------------------------------------------


def check_router(report: Report, config: Config) -> None:
    """`doctor`'s router line: skipped when the router is off, else whether it answers, lists the
    configured model and has its key (asked of the router as a run builds it: wiring.router_health)."""
    from ..wiring import router_health

    settings = config.router
    if not settings.enabled:
        report.add("router", SKIP, "router.enabled = false: no fallback when the chat fails hard")
        return
    health = router_health(config)
    base = health["base_url"]
    if not health["reachable"]:
        report.add(
            "router",
            FAIL,
            health["error"] or f"cannot reach {base}",
            f"start the router, or fix router.base_url (now {base})",
            **_router_extra(health),
        )
        report.add("router model", SKIP, f"{settings.model}: the router is not reachable")
        return
    if health["health_ok"] is False:
        report.add(
            "router",
            WARN,
            f"{base} answers, but /api/health is not ok",
            "check the router's own logs (some routers have no /api/health: then ignore this)",
            **_router_extra(health),
        )
    else:
        report.add("router", OK, f"{base} reachable (/api/health ok)", **_router_extra(health))
    model = health["model"]
    if health["model_listed"] is None:
        report.add(
            "router model",
            FAIL,
            f"cannot list the models: {health['error']}",
            f"check router.base_url and the key in {health['key_source']}",
        )
    elif not health["model_listed"]:
        some = ", ".join(health["models"][:8]) or "none"
        report.add(
            "router model",
            FAIL,
            f"{model} is not listed by {base}/models (it lists: {some})",
            "set router.model to one of the listed ids",
        )
    else:
        report.add("router model", OK, f"{model} is listed")


def _router_extra(health: dict) -> dict:
    return {"key_set": health["key_set"], "models_status": health["models_status"]}
