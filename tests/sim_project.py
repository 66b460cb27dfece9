"""A project folder wired to a running simulator: config.toml, prompts/, articles/."""

from __future__ import annotations

import tomllib
from pathlib import Path

import shared_browser

# Set for a test by conftest when its module says OWN_BROWSER = True: the module's point is the
# launch itself (a profile and its saved login, a proxy, a headed window, the launch count).
OWN_BROWSER = False


def make_project(
    folder: Path,
    sim,
    *,
    router: bool = True,
    extra: str = "",
    stable_reads: int = 1,
    own_browser: bool | None = None,
    headless_shell: bool = False,
) -> Path:
    """`stable_reads = 1`: an answer the site calls finished is taken at the first read (the
    engine's own tests, test_qwen_engine and test_steadiness, check the reads a second apart).
    The commands attach to the test process's shared Chromium (tests/shared_browser.py) unless
    `own_browser` (None: the test module's OWN_BROWSER, see conftest): then each launches its
    own on the project's profile, as cron runs do; `headless_shell`: that own browser is the
    lighter headless shell of the same Chromium (tests/shared_browser.py), for runs whose point
    is the contract under kills and races, not the browser's launch (the chaos runs)."""
    own = OWN_BROWSER if own_browser is None else own_browser
    attach = "" if own else f'cdp_url = "{shared_browser.cdp_url()}"\n'
    shell = shared_browser.headless_shell() if own and headless_shell else None
    if shell:
        attach = f'executable = "{shell}"\n'
    (folder / "prompts").mkdir(parents=True, exist_ok=True)
    (folder / "articles").mkdir(exist_ok=True)
    (folder / "config.toml").write_text(
        f"""[qwen]
base_url = "{sim.base_url}"
poll_interval = 0
max_attempts = 3
page_timeout = 15
stable_reads = {stable_reads}
{extra}
[browser]
profile_dir = "profile"
storage_state = "state.json"
{attach}[router]
enabled = {"true" if router else "false"}
base_url = "{sim.base_url}/v1"
model = "test/model"
max_retries = 1
max_retry_wait = 1
""",
        encoding="utf-8",
    )
    return folder


def finish_answer(sim, chat_url: str, *, after: float = 0.0) -> None:
    """Let the chat's growing last answer end `after` seconds from now (a test gives an answer a
    long time to grow, so that it is read mid-way however slow the machine, then ends it)."""
    import time

    from pipeline.engines.qwen.api import chat_id_from_url

    with sim.store.lock:
        message = sim.store.chats[chat_id_from_url(chat_url)].last_assistant()
        elapsed = time.monotonic() - message.started
        message.answer_seconds = min(
            message.answer_seconds, max(0.0, elapsed - message.thinking_seconds) + after
        )


def wait_stored_finished(sim, chat: str, seconds: float = 20) -> None:
    """Wait until the site stores the last answer of `chat` (its URL or id) as finished. The site
    stores "finished" a moment after the last words: a test that expects the next run to take the
    answer waits for that, instead of counting on the machine being slow enough."""
    import time

    from pipeline.engines.qwen.api import chat_id_from_url
    from pipeline.simulator import views

    ident = chat_id_from_url(chat) or chat.strip()
    deadline = time.monotonic() + seconds
    while True:
        with sim.store.lock:
            message = sim.store.chats[ident].last_assistant()
            settings = sim.store.settings
        if message is not None and views.progress(message, settings, time.monotonic())["finished"]:
            return
        assert time.monotonic() < deadline, f"the answer of chat {ident} was never stored as finished"
        time.sleep(0.05)


def sign_in_as(email: str):
    """What a person does on the simulator's sign-in page (run_login's `on_page`): fill it in,
    press the button and wait until the page has left the sign-in page. Reading the login
    state before the site's answer came back reads "signed out" (the CI failure of stop 45)."""

    def sign_in(page) -> None:
        page.fill("input[type=email]", email)
        page.fill("input[type=password]", "secret")
        page.click("button.login-button")
        page.wait_for_url(lambda url: "/auth" not in url)

    return sign_in


def prompt(folder: Path, slug: str, text: str) -> str:
    (folder / "prompts" / f"{slug}.md").write_text(text, encoding="utf-8")
    return text


def read_article(path: Path) -> tuple[dict, str]:
    text = path.read_text(encoding="utf-8")
    head, body = text[4:].split("\n+++\n", 1)
    return tomllib.loads(head), body.strip()


def journal(folder: Path) -> list[dict]:
    """Every journal event of the project's store, oldest first (as `qwenpipe log --json` prints them)."""
    from pipeline.wiring import open_sqlite

    with open_sqlite(folder / "articles" / ".qwenpipe") as store:
        return [event.to_entry() for event in store.events()]


def add_accounts(folder: Path, names, **keys) -> dict[str, Path]:
    """`[accounts.NAME]` tables (each at its default paths, plus `keys`) at the end of the
    project's config.toml; each account's saved-login path by name."""
    import tomli_w

    with (folder / "config.toml").open("a", encoding="utf-8") as config:
        config.write("\n" + tomli_w.dumps({"accounts": {name: dict(keys) for name in names}}))
    return {name: folder / ".qwenpipe" / "accounts" / name / "state.json" for name in names}


def senders(sim, start: int = 0) -> dict[str, list[str]]:
    """Prompt -> the accounts that the site took it from (the ledger's accepted sends since
    entry `start`)."""
    taken: dict[str, list[str]] = {}
    for entry in sim.ledger()[start:]:
        if entry["accepted"]:
            taken.setdefault(entry["prompt"], []).append(entry["account"])
    return taken
