"""Finding and starting the one browser a command (or a whole cron cycle) uses.

Which browser: `browser.executable` when set, else Playwright's own Chromium when it is really
installed, else a Chromium or Chrome on PATH. Or none at all: `browser.cdp_url` attaches to a
Chrome the user already runs (fewer bot checks), which we must then never close.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from pipeline.engines.base import HardError

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

    code = "browser_not_found"


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
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            return p.chromium.executable_path
    except Exception:  # no driver, or asked inside a running loop: treat as "not installed"
        return None


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
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    cookies = [c for c in state.get("cookies", []) if isinstance(c, dict) and c.get("name")]
    if cookies:
        context.add_cookies(cookies)
    for origin in state.get("origins", []):
        items = {i["name"]: i["value"] for i in origin.get("localStorage", []) if "name" in i}
        if items:
            context.add_init_script(_local_storage_script(origin.get("origin", ""), items))
    return True


def _local_storage_script(origin: str, items: dict[str, str]) -> str:
    return (
        f"(() => {{ if (location.origin !== {json.dumps(origin)}) return;"
        f" const items = {json.dumps(items)};"
        " for (const [k, v] of Object.entries(items))"
        " if (localStorage.getItem(k) === null) localStorage.setItem(k, v); })();"
    )


class BrowserSession:
    """One browser for as long as the session lives, started on first use of `.context`.

    Launches a persistent profile (the login survives), or attaches over CDP to a running
    Chrome and then only ever closes the pages it opened itself.
    """

    launches = 0  # browsers launched by this process (tests assert one per cycle)

    def __init__(self, browser: dict, *, root: Path | None = None):
        self.config = browser
        self.root = Path(root) if root else Path.cwd()
        self.description = ""
        self._playwright = None
        self._context = None
        self._owns_context = False
        self._pages: list[Any] = []

    def _path(self, key: str) -> Path:
        return (self.root / os.path.expanduser(self.config.get(key) or "")).resolve()

    @property
    def started(self) -> bool:
        return self._context is not None

    @property
    def context(self) -> Any:
        if self._context is None:
            self._start()
        return self._context

    def new_page(self) -> Any:
        self._pages = [p for p in self._pages if not p.is_closed()]
        page = self.context.new_page()
        self._pages.append(page)
        return page

    def _start(self) -> None:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        try:
            if self.config.get("cdp_url"):
                self._attach(self.config["cdp_url"])
            else:
                self._launch()
        except PlaywrightError as err:
            self._stop_playwright()
            raise HardError(f"the browser did not start: {_first_line(err)}", code="browser_launch") from None
        except BaseException:
            self._stop_playwright()
            raise

    def _attach(self, cdp_url: str) -> None:
        browser = self._playwright.chromium.connect_over_cdp(cdp_url)
        if browser.contexts:
            self._context, self._owns_context = browser.contexts[0], False
        else:
            self._context, self._owns_context = browser.new_context(), True
        self.description = f"attached over CDP ({cdp_url})"

    def _launch(self) -> None:
        chromium = self._playwright.chromium
        executable, self.description = find_executable(self.config.get("executable", ""), chromium=chromium)
        profile = self._path("profile_dir")
        is_new_profile = not (profile / "Default").exists()
        profile.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(profile, 0o700)  # mkdir's mode is masked by umask; the profile holds the login
        self._context = chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=bool(self.config.get("headless", True)),
            args=launch_args(self.config.get("args") or []),
        )
        self._owns_context = True
        BrowserSession.launches += 1
        state = self._path("storage_state")
        if is_new_profile and state.is_file():
            load_storage_state(self._context, state)

    def close(self) -> None:
        """Close what we opened: the whole browser if we launched it, else only our pages."""
        try:
            if self._context is not None:
                if self._owns_context:
                    self._context.close()
                else:
                    for page in self._pages:
                        if not page.is_closed():
                            page.close()
        except Exception:
            pass  # a browser that already died is closed enough
        finally:
            self._pages.clear()
            self._context = None
            self._stop_playwright()

    def _stop_playwright(self) -> None:
        if self._playwright is not None:
            try:
                self._playwright.stop()
            except Exception:
                pass
            self._playwright = None

    def __enter__(self) -> BrowserSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_line(err: BaseException) -> str:
    text = str(getattr(err, "message", "") or err).strip()
    return text.splitlines()[0] if text else type(err).__name__
