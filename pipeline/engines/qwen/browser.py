"""Finding and starting the one browser a command (or a whole cron cycle) uses.

Which browser: `browser.executable` when set, else Playwright's own Chromium when it is really
installed, else a Chromium or Chrome on PATH. Or none at all: `browser.cdp_url` attaches to a
Chrome the user already runs (fewer bot checks), which we must then never close.

The profile lock (one process per browser profile) is given by the caller (`LockProfile`):
this package knows browsers, not the project's files.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...pathguard import absolute
from ...proxy import parse as parse_proxy
from ...redact import first_line
from ..base import Code, EngineBusy, HardError, LockProfile
from .closing import close_page
from .display import NoDisplay, VirtualDisplay, no_display_message, plan_display
from .headers import watch
from .saved_login import Loaded, save_back
from .tokens import listed, local_storage
from .trace import keep_trace, start_trace

if TYPE_CHECKING:  # the section's type only: engines do not import the config
    from ...config import Browser

PATH_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = (
    "install one with `apt-get install -y chromium` (or `playwright install chromium`), "
    "or set browser.executable in config.toml to the browser's path"
)
# Quieter, more predictable runs from cron: no background updates, sync or first-run dialogs.
BASE_ARGS = (
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-gpu",
)


class BrowserNotFound(HardError):
    """No usable browser: the message says what to install or which key to fix."""

    code = Code.BROWSER_NOT_FOUND


def find_executable(configured: str, *, chromium: Any = None) -> tuple[str | None, str]:
    """(path, description) of the browser to launch; path None means Playwright's bundled one.

    `chromium` is a Playwright BrowserType (to ask where its bundled Chromium lives); without it
    a short-lived Playwright is started just to ask.
    """
    if configured:
        return _configured_executable(configured), f"browser.executable ({configured})"
    bundled = _bundled_chromium_path(chromium)
    if bundled and os.path.isfile(bundled) and os.access(bundled, os.X_OK):
        return None, f"Playwright's Chromium ({bundled})"
    for name in PATH_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found, f"{name} on PATH ({found})"
    raise BrowserNotFound(
        f"no browser found (Playwright's Chromium is not installed and none of "
        f"{', '.join(PATH_CANDIDATES)} is on PATH): {INSTALL_HINT}"
    )


def _configured_executable(configured: str) -> str:
    path = os.path.expanduser(configured)
    if os.sep not in path:  # a bare name such as "chromium": look it up like a shell would
        path = shutil.which(path) or path
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise BrowserNotFound(
            f"browser.executable = {configured!r}: no executable file at {path}; "
            f'fix the path in config.toml or set it to "" to find a browser automatically'
        )
    return path


def _bundled_chromium_path(chromium: Any) -> str | None:
    try:
        if chromium is not None:
            return chromium.executable_path
        with playwright_driver() as playwright:
            return playwright.chromium.executable_path
    except Exception:  # no driver, or asked inside an asyncio loop: treat as "not installed"
        return None


class _SharedPlaywright(threading.local):
    """One Playwright driver per thread, shared by every BrowserSession of that thread.

    The sync API refuses to start a second driver in a thread that runs one already, so two
    sessions (a cycle's browser and an attached one, `doctor` and an engine) must share it. It
    is not thread-safe either, but one driver per thread is supported: a cycle's poll workers
    each get their own (each attribute below is per thread).
    """

    def __init__(self) -> None:
        self._playwright: Any = None
        self._users = 0

    def acquire(self) -> Any:
        if self._playwright is None:
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
        self._users += 1
        return self._playwright

    def release(self) -> None:
        self._users -= 1
        if self._users <= 0 and self._playwright is not None:
            playwright, self._playwright, self._users = self._playwright, None, 0
            try:
                playwright.stop()
            except Exception:
                pass  # the driver is already gone


_PLAYWRIGHT = _SharedPlaywright()


@contextmanager
def playwright_driver() -> Iterator[Any]:
    """A use of this thread's Playwright driver, started on first use and stopped when its last
    use ends: what holds it open across several browser sessions (a doctor run's look-up and
    its browser; a process that runs commands one after another) pays one driver start, about
    0.4 CPU-seconds, instead of one per session."""
    playwright = _PLAYWRIGHT.acquire()
    try:
        yield playwright
    finally:
        _PLAYWRIGHT.release()


class _SharedBrowser(threading.local):
    """One Chromium per thread for the accounts of a setup with several: each account's session
    is a context of it (its own cookies and storage, loaded from its saved login), so a cycle
    runs one browser process however many accounts it serves. Launched by the first session
    that needs it, closed when the last one closes. It listens on a loopback DevTools port, so
    a cycle's poll threads attach to it (each with contexts of its own)."""

    def __init__(self) -> None:
        self._browser: Any = None
        self._users = 0
        self._xvfb: VirtualDisplay | None = None
        self.endpoint: str | None = None

    def acquire(self, session: BrowserSession) -> Any:
        if self._browser is None or not self._browser.is_connected():
            self._launch(session)
        self._users += 1
        return self._browser

    def _launch(self, session: BrowserSession) -> None:
        chromium = session._playwright.chromium
        executable, session.description = find_executable(session.config.executable, chromium=chromium)
        port = _free_port()
        args = launch_args(session.config.args) + [f"--remote-debugging-port={port}"]
        env = session._screen_env()
        self._xvfb, session._xvfb = session._xvfb, None  # the display lives as long as the browser
        try:
            self._browser = chromium.launch(
                executable_path=executable,
                headless=session.config.headless,
                args=args,
                env=env,
            )
        except Exception:
            self._stop_xvfb()
            raise
        self.endpoint = f"http://127.0.0.1:{port}"
        BrowserSession.launches += 1
        session.launched += 1

    def release(self) -> None:
        self._users -= 1
        if self._users <= 0 and self._browser is not None:
            browser, self._browser, self._users, self.endpoint = self._browser, None, 0, None
            try:
                browser.close()
            except Exception:
                pass  # the browser is already gone
            self._stop_xvfb()

    def _stop_xvfb(self) -> None:
        xvfb, self._xvfb = self._xvfb, None
        if xvfb is not None:
            xvfb.stop()


_BROWSER = _SharedBrowser()


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def launch_args(extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Chromium switches: ours, --no-sandbox as root (Chromium refuses to start otherwise), the user's."""
    args = list(BASE_ARGS)
    if is_root():
        args.append("--no-sandbox")
    args.extend(a for a in extra if a not in args)
    return args


def load_storage_state(context: Any, state_path: Path) -> bool:
    """Put a saved login (Playwright storage state JSON) into a context; False when unusable.

    Cookies go in directly; localStorage through an init script that only fills keys the page
    does not have yet, so a token the site refreshes later is never overwritten by the old one.
    """
    from playwright.sync_api import Error as PlaywrightError

    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    cookies = [c for c in listed(state, "cookies") if isinstance(c, dict) and c.get("name")]
    if cookies:
        try:
            context.add_cookies(cookies)
        except PlaywrightError:
            return False  # a hand-edited file Chromium refuses: the run goes on logged out, and says so
    for origin in listed(state, "origins"):
        items = {i["name"]: i["value"] for i in local_storage(origin)}
        if items:
            context.add_init_script(_local_storage_script(str(origin.get("origin", "")), items))
    return True


def _local_storage_script(origin: str, items: dict[str, str]) -> str:
    return (
        f"(() => {{ if (location.origin !== {json.dumps(origin)}) return;"
        f" const items = {json.dumps(items)};"
        " for (const [k, v] of Object.entries(items))"
        " if (localStorage.getItem(k) === null) localStorage.setItem(k, v); })();"
    )


PARK_TIMEOUT_MS = 5000  # about:blank needs no network: a page that takes longer is closed instead

# In a profile: its mtime says when the login file was last loaded into it (or saved from it).
LOADED_MARKER = "qwenpipe-state-loaded"

# What Chromium says when another browser runs on the same user data dir.
PROFILE_IN_USE = ("ProcessSingleton", "profile appears to be in use", "SingletonLock")


class BrowserSession:
    """One browser for as long as the session lives, started on first use of `.context`.

    Launches a persistent profile (the login survives), or attaches over CDP to a running
    Chrome and then only ever closes the pages it opened itself.
    """

    launches = 0  # browsers launched by this process (tests assert one per cycle)

    def __init__(
        self,
        browser: Browser,
        *,
        root: Path | None = None,
        expose_cdp: bool = False,
        borrowed: bool = False,
        lock_profile: LockProfile | None = None,
        shared_browser: bool = False,
        trace: Path | None = None,
    ):
        """Nothing starts here: the browser launches (or is attached to) on first use of
        `.context`. Each option is explained where it is kept, below."""
        self.config = browser
        self.root = Path(root) if root else Path.cwd()
        self.description = ""
        self.launched = 0  # browsers this session launched (attaching to one is none)
        # expose_cdp: a launched browser also listens on a loopback DevTools port (chosen by
        # Chromium) so that other threads can attach to it: see `cdp_endpoint`.
        self.expose_cdp = expose_cdp
        # borrowed: attached to the browser of this same process's cycle; when that browser is
        # gone the article waits for the next cycle (EngineBusy), never a hard failure.
        self.borrowed = borrowed
        # lock_profile: held while our browser runs on the profile (None: the caller sees to it).
        self.lock_profile = lock_profile
        # shared_browser: one of several accounts: a context of the thread's one browser, made
        # from the account's saved login (storage_state), instead of a persistent profile.
        self.shared_browser = shared_browser
        # trace: where the Playwright trace of this session's context is kept when it closes
        # (`[browser] trace`, trace.py); None: not traced.
        self.trace = trace
        self._tracing = False
        self._holds_shared = False
        self._release_profile: Any = None
        self._cdp_endpoint: str | None = None
        self._playwright = None
        self._attached: Any = None  # the connection of connect_over_cdp, dropped as we close
        self._context = None
        self._owns_context = False
        self._pages: list[Any] = []
        self._spare: Any = None  # a page of ours on about:blank, for the next use (`park`)
        # The account's login file as the context was opened from it: written back from what the
        # context holds when a run that opened a page ends (saved_login.py).
        self._login: Loaded | None = None
        self._opened_page = False
        self._xvfb: VirtualDisplay | None = None  # started for a headed launch without a screen

    def _path(self, value: str) -> Path:
        # Not resolved: a symlink at a saved login or a profile is refused, never followed.
        return absolute(self.root, value)

    @property
    def started(self) -> bool:
        return self._context is not None

    @property
    def context(self) -> Any:
        if self._context is None:
            self._start()
        return self._context

    def new_page(self) -> Any:
        """A page for one use: the one parked by the last use if there is one, else a new one;
        if the browser died since the last one (a crash mid-cycle), start again once."""
        from playwright.sync_api import Error as PlaywrightError

        self._pages = [p for p in self._pages if not p.is_closed()]
        page, self._spare = self._spare, None
        if page is None or page.is_closed():
            try:
                page = self.context.new_page()
            except PlaywrightError:
                self.close()
                page = self.context.new_page()
            self._adopt(page)
        self._opened_page = True
        return page

    def _adopt(self, page: Any) -> None:
        watch(page)  # learn the headers of the page's own API calls from its first request on
        self._pages.append(page)

    def park(self, page: Any) -> None:
        """Keep `page`, done with, for the next `new_page` instead of closing it: one tab per
        account, as a person uses the site, and cheaper than a new tab per call (about a sixth
        of an article's CPU in a cycle: docs/performance.md). It waits on about:blank (the app
        stopped: no timers, streams or frames) and forgets the headers it learned, so its next
        use learns them from its own next load. At most one."""
        try:
            page.goto("about:blank", timeout=PARK_TIMEOUT_MS)
        except Exception:
            close_page(page)  # a page that will not leave (or is gone): closed, as before
            return
        watch(page).forget()
        spare, self._spare = self._spare, page
        if spare is not None and spare is not page:
            close_page(spare)

    def _start(self) -> None:
        from playwright.sync_api import Error as PlaywrightError

        self._playwright = _PLAYWRIGHT.acquire()
        try:
            if self.config.cdp_url:
                self._attach(self.config.cdp_url)
            elif self.shared_browser:
                shared = _BROWSER.acquire(self)
                self._holds_shared = True  # from here on: a failure below lets it go
                self._open_account_context(shared)
            else:
                self._launch()
            # Never a context of a Chrome the user runs (cdp_url): its other tabs are theirs.
            self._tracing = self.trace is not None and self._owns_context and start_trace(self._context)
        except PlaywrightError as err:
            self.close()  # what it took half-way: the connection, the shared browser, the driver
            if self.borrowed:
                raise EngineBusy(
                    f"the cycle's browser is gone ({first_line(err)}); this article waits for the next cycle"
                ) from None
            raise HardError(
                f"the browser did not start: {first_line(err)}", code=Code.BROWSER_LAUNCH
            ) from None
        except BaseException:
            self.close()
            raise

    def _attach(self, cdp_url: str) -> None:
        browser = self._attached = self._playwright.chromium.connect_over_cdp(cdp_url)
        if self.shared_browser:  # an account's own context, never another account's
            self._open_account_context(browser)
            self.description = f"attached over CDP ({cdp_url}), a context of its own"
            return
        if browser.contexts:
            self._context, self._owns_context = browser.contexts[0], False
        else:
            self._context, self._owns_context = browser.new_context(), True
        self.description = f"attached over CDP ({cdp_url})"

    def _open_account_context(self, browser: Any) -> None:
        """A fresh context of `browser` holding this account's saved login (none: logged out),
        going out through this account's proxy when it has one (a context's own, in Chromium)."""
        self._context, self._owns_context = browser.new_context(**self._proxy_option()), True
        state = self._path(self.config.storage_state)
        self._login = Loaded.of(state)
        if state.is_file():
            load_storage_state(self._context, state)

    def _launch(self) -> None:
        """Launch Chromium on the account's persistent profile (locked while it runs), and load
        the saved login into a new profile or one it was copied in for since."""
        chromium = self._playwright.chromium
        executable, self.description = find_executable(self.config.executable, chromium=chromium)
        profile = self._path(self.config.profile_dir)
        is_new_profile = not (profile / "Default").exists()
        profile.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(profile, 0o700)  # mkdir's mode is masked by umask; the profile holds the login
        self._lock_profile(profile)
        args = launch_args(self.config.args)
        if self.expose_cdp:
            args.append("--remote-debugging-port=0")  # loopback only; Chromium picks the port
            (profile / DEVTOOLS_PORT_FILE).unlink(missing_ok=True)  # an earlier browser's port
        try:
            self._context = chromium.launch_persistent_context(
                str(profile),
                executable_path=executable,
                headless=self.config.headless,
                args=args,
                env=self._screen_env(),
                **self._proxy_option(),
                # Ctrl-C reaches Playwright's driver too (our process group); left to its default
                # it closes the browser at once, racing our own KeyboardInterrupt, and the step
                # saw "browser closed" (exit 3) instead of the interrupt (130). We close it ourselves.
                handle_sigint=False,
            )
        except Exception as err:
            self._stop_xvfb()
            self._unlock_profile()
            if any(sign in str(err) for sign in PROFILE_IN_USE):
                raise EngineBusy(
                    f"the browser profile {profile} is in use by another Chrome; this run steps aside"
                ) from None
            raise
        self._owns_context = True
        BrowserSession.launches += 1
        self.launched += 1
        for first in self._context.pages[:1]:  # the tab Chromium opens with a profile: our first
            self._adopt(first)
            self._spare = first
        state = self._path(self.config.storage_state)
        self._login = Loaded.of(state)
        loaded = profile / LOADED_MARKER
        if state.is_file() and (
            is_new_profile or not loaded.exists() or state.stat().st_mtime > loaded.stat().st_mtime
        ):
            # A new profile, or a state file copied in since (a login done on another machine).
            load_storage_state(self._context, state)
            loaded.touch()

    def _proxy_option(self) -> dict[str, Any]:
        """Playwright's `proxy` option for this account's browser ({} without a proxy). Playwright
        then proxies loopback too (`<-loopback>` in Chromium's bypass list), so a proxy in front
        of the simulator sees its traffic as one in front of the site would."""
        return {"proxy": parse_proxy(self.config.proxy).playwright()} if self.config.proxy else {}

    def _screen_env(self) -> dict | None:
        """The browser's environment when it needs a screen of ours (DISPLAY of a fresh Xvfb);
        None: it inherits ours. NoDisplay (exit 2) when it needs a screen and may have none."""
        plan = plan_display(self.config)
        if plan.use == "missing":
            raise NoDisplay(no_display_message(plan))
        if not plan.starts_xvfb:
            return None
        self._xvfb = VirtualDisplay(plan.xvfb or "")
        display = self._xvfb.start()
        return {**os.environ, "DISPLAY": display}

    def _stop_xvfb(self) -> None:
        xvfb, self._xvfb = self._xvfb, None
        if xvfb is not None:
            xvfb.stop()

    def cdp_endpoint(self, timeout: float = 5.0) -> str | None:
        """Where other threads (their own Playwright each) attach to this session's browser.

        Attached over CDP: the configured `cdp_url`. Launched with `expose_cdp`: the DevTools
        WebSocket Chromium announces in `<profile>/DevToolsActivePort` (waited for up to
        `timeout` seconds). None when not started, or launched without `expose_cdp`.
        """
        if self._context is None:
            return None
        if self.config.cdp_url:
            return self.config.cdp_url
        if self._holds_shared:
            return _BROWSER.endpoint
        if not self.expose_cdp:
            return None
        if self._cdp_endpoint is None:
            self._cdp_endpoint = read_devtools_endpoint(self._path(self.config.profile_dir), timeout=timeout)
        return self._cdp_endpoint

    def close(self) -> None:
        """Close what we opened: the whole browser if we launched it, else only our pages."""
        try:
            if self._context is not None:
                if self._tracing and self.trace is not None:
                    keep_trace(self._context, self.trace)  # first: it needs the context open
                try:
                    self._save_login()
                except Exception:
                    pass  # the login file stays as it was; the context is closed all the same
                if self._owns_context:
                    self._context.close()
                else:
                    for page in self._pages:
                        close_page(page)
        except Exception:
            pass  # a browser that already died is closed enough
        finally:
            self._disconnect()
            self._pages.clear()
            self._spare = None
            self._login, self._opened_page = None, False
            self._tracing = False
            self._context = None
            self._cdp_endpoint = None
            if self._holds_shared:
                self._holds_shared = False
                _BROWSER.release()
            self._stop_playwright()
            self._stop_xvfb()
            self._unlock_profile()

    def _disconnect(self) -> None:
        """Drop our DevTools connection to a browser we attached to (cdp_url, the cycle's browser
        from a poll thread): `close` of a Browser that Playwright connected to over CDP
        disconnects and leaves the browser running (test_qwen_engine.py, "each attach"). Left
        open, it lived as long as the thread's Playwright driver, and the browser kept telling it
        about every page opened later: each attach of a process that holds its driver (the test
        suite's in-process commands) made the browser's work grow (docs/performance.md)."""
        attached, self._attached = self._attached, None
        if attached is not None:
            try:
                attached.close()
            except Exception:
                pass  # the browser or the driver is gone: nothing is connected any more

    def _save_login(self) -> None:
        """What the context holds goes back to the account's login file when a page was opened in
        it (a context of our own: never a Chrome the user runs). A profile's own marker is
        touched after it, so the next launch does not load the file it already holds."""
        if self._login is None or not self._opened_page or not self._owns_context:
            return
        if save_back(self._context, self._login) and not self.shared_browser and not self.config.cdp_url:
            (self._path(self.config.profile_dir) / LOADED_MARKER).touch()

    def _lock_profile(self, profile: Path) -> None:
        """One qwenpipe process per profile: Chromium refuses a second browser on it anyway, and
        that refusal must read as "busy, try later" (the lock raises EngineBusy), never as a hard
        failure of the article."""
        if self.lock_profile is not None:
            self._release_profile = self.lock_profile(profile)

    def _unlock_profile(self) -> None:
        release, self._release_profile = self._release_profile, None
        if release is not None:
            release()

    def _stop_playwright(self) -> None:
        if self._playwright is not None:
            self._playwright = None
            _PLAYWRIGHT.release()

    def __enter__(self) -> BrowserSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


DEVTOOLS_PORT_FILE = "DevToolsActivePort"


def read_devtools_endpoint(profile: Path, *, timeout: float = 5.0) -> str | None:
    """The DevTools WebSocket of the browser running on `profile` (launched with
    --remote-debugging-port), from the file Chromium writes there: port, then browser path."""
    deadline = time.monotonic() + timeout
    path = Path(profile) / DEVTOOLS_PORT_FILE
    while True:
        try:
            lines = path.read_text(encoding="ascii").split()
        except (OSError, UnicodeDecodeError):
            lines = []
        if len(lines) >= 2 and lines[0].isdigit() and lines[1].startswith("/devtools/browser/"):
            return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)
