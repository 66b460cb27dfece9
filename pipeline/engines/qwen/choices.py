"""Choosing how a new chat answers, through the page, before its first send: the model picker,
the thinking toggle and the mode menu's web search (docs/qwen-site.md, "The page").

Only these controls are clicked, never the send button, and each choice is read back from the
page once made. What the page cannot do is a HardError raised before anything is sent, so the
engine marks it `nothing_sent`: a model the site does not offer is never replaced by another.
"""

from __future__ import annotations

import time
from typing import Any

from pipeline.engines.base import ChatChoice, HardError, same_model
from pipeline.engines.qwen.selectors import WEB_SEARCH_LABEL, Selectors

OPEN_SECONDS = 5.0  # how long an opened list may take to draw, and a choice to show
PAUSE_MS = 100

# A toggle is on when it says so the way toggles do: an ARIA state, or an "on" class.
_IS_ON_JS = """(el) =>
  ['aria-pressed', 'aria-checked', 'aria-selected'].some((a) => el.getAttribute(a) === 'true')
  || Array.from(el.classList).some((c) => /(^|-)(active|selected|checked)$/.test(c))"""


def apply_choice(page: Any, selectors: Selectors, choice: ChatChoice) -> None:
    """Set the page up as `choice` asks; raise HardError when it cannot be done."""
    if choice.model:
        choose_model(page, selectors, choice.model)
    if choice.thinking != "auto":
        set_thinking(page, selectors, choice.thinking == "on")
    if choice.web_search:
        # Only ever turned on: a new chat starts without it, and reading a mode menu's state is
        # a guess that must not stand between the default setup and every send.
        set_web_search(page, selectors, on=True)


def choose_model(page: Any, selectors: Selectors, wanted: str) -> None:
    """Pick `wanted` (as the picker names it) in the model picker, unless it is already chosen."""
    default = 'qwen.model = "" for the site\'s default model'
    picker = _needed(page, selectors, "model_picker", f"qwen.model = {wanted!r}", default)
    label = picker.locator(selectors.model_label).first if selectors.model_label else picker
    if label is not picker and not label.count():
        label = picker

    def chosen() -> str:
        return _first_line(label.inner_text())

    if same_model(wanted, chosen()):
        return
    picker.click()
    options = page.locator(selectors.model_option)
    names = _listed(options)
    for index, name in enumerate(names):
        if same_model(wanted, name):
            options.nth(index).click()
            break
    else:
        page.keyboard.press("Escape")
        offered = ", ".join(repr(n) for n in names if n) or "no models"
        raise HardError(
            f"qwen.model = {wanted!r} is not a model the site offers (its picker shows {offered}); "
            'set qwen.model, or the prompt\'s [qwen] model, to one of them, or to "" for the default',
            code="model_not_offered",
        )
    if not _shows(lambda: same_model(wanted, chosen())):
        raise HardError(
            f"the model picker still shows {chosen()!r} after choosing {wanted!r}: not sending",
            code="model_not_chosen",
        )


def set_thinking(page: Any, selectors: Selectors, on: bool) -> None:
    """Turn the thinking toggle on or off."""
    wanted = "on" if on else "off"
    toggle = _needed(
        page, selectors, "thinking_toggle", f"qwen.thinking = {wanted!r}", 'qwen.thinking = "auto"'
    )
    if _is_on(toggle) == on:
        return
    toggle.click()
    if not _shows(lambda: _is_on(toggle) == on):
        raise HardError(f"the thinking toggle did not turn {wanted}: not sending", code="thinking_not_set")


def set_web_search(page: Any, selectors: Selectors, on: bool) -> None:
    """Turn web search on or off in the mode menu (whose label names the chosen mode)."""
    setting = f"qwen.web_search = {'true' if on else 'false'}"
    menu = _needed(page, selectors, "mode_menu", setting, "qwen.web_search = false", code="no_web_search")
    if _names_web_search(menu.inner_text()) == on:
        return
    menu.click()
    items = page.locator(selectors.mode_item)
    labels = _listed(items)
    found = next((i for i, label in enumerate(labels) if _names_web_search(label)), None)
    if found is None:
        page.keyboard.press("Escape")
        shown = ", ".join(repr(label) for label in labels if label) or "nothing"
        raise HardError(
            f"qwen.web_search = {'true' if on else 'false'}: the mode menu has no "
            f"{WEB_SEARCH_LABEL!r} item (it shows {shown})",
            code="no_web_search",
        )
    items.nth(found).click()
    if not _shows(lambda: _names_web_search(menu.inner_text()) == on):
        raise HardError(
            f"web search did not turn {'on' if on else 'off'} in the mode menu: not sending",
            code="web_search_not_set",
        )


def _needed(page: Any, selectors: Selectors, name: str, setting: str, instead: str, code: str = "") -> Any:
    """The control the `name` selector finds, which `setting` needs; HardError (`code`, by
    default no_NAME) naming the selector to set, or the setting to use `instead`, when none."""
    control = _control(page, getattr(selectors, name))
    if control is None:
        raise HardError(
            f"{setting}: the chat page shows no {name.replace('_', ' ')} ({_which(selectors, name)}); "
            f"set qwen.selectors.{name}, or {instead}",
            code=code or f"no_{name}",
        )
    return control


def _control(page: Any, css: str) -> Any | None:
    """The first element `css` matches, or None (also for "": this UI has no such control)."""
    if not css:
        return None
    found = page.locator(css)
    return found.first if found.count() else None


def _listed(items: Any) -> list[str]:
    """The first line of each item of a list just opened (empty when it never drew any)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        items.first.wait_for(state="visible", timeout=OPEN_SECONDS * 1000)
    except PlaywrightTimeout:
        return []
    return [_first_line(text) for text in items.all_inner_texts()]


def _shows(ready: Any) -> bool:
    """Whether `ready()` comes true within OPEN_SECONDS (the page redraws after a click)."""
    deadline = time.monotonic() + OPEN_SECONDS
    while not ready():
        if time.monotonic() >= deadline:
            return False
        time.sleep(PAUSE_MS / 1000)
    return True


def _is_on(toggle: Any) -> bool:
    return bool(toggle.evaluate(_IS_ON_JS))


def _names_web_search(text: str) -> bool:
    return WEB_SEARCH_LABEL.lower() in " ".join(text.lower().split())


def _first_line(text: str) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")


def _which(selectors: Selectors, name: str) -> str:
    css = getattr(selectors, name)
    return css if css else f"the {selectors.name!r} UI has none"
