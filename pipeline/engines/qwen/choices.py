"""Choosing how a new chat answers, through the page, before its first send: the model picker,
the thinking select (or, on older pages, the thinking toggle) and the mode menu's web search
(docs/qwen-site.md).

Only these controls are clicked, never the send button, and each choice is read back from the
page once made. What the page cannot do is a HardError raised before anything is sent, so the
engine marks it `nothing_sent`: a model the site does not offer is never replaced by another.
"""

from __future__ import annotations

import time
from typing import Any

from ..base import ChatChoice, Code, HardError, same_model
from .selectors import THINKING_OPTIONS, WEB_SEARCH_LABEL, Selectors

OPEN_SECONDS = 5.0  # how long an opened list may take to draw, and a choice to show
PAUSE_MS = 100

# A toggle is on when it says so the way toggles do: an ARIA state, or an "on" class.
_IS_ON_JS = """(el) =>
  ['aria-pressed', 'aria-checked', 'aria-selected'].some((a) => el.getAttribute(a) === 'true')
  || Array.from(el.classList).some((c) => /(^|-)(active|selected|checked)$/.test(c))"""

# What a select shows as chosen: an Ant Design select draws it beside its combobox input (which
# itself stays empty); another select shows it as its value or its own text.
_SELECTED_JS = """(el) => {
  const box = el.closest('.ant-select');
  const item = box && box.querySelector('.ant-select-selection-item');
  if (item) return item.getAttribute('title') || item.textContent || '';
  return el.value || el.textContent || '';
}"""
# Where a select opens: an Ant Design select opens on a press of its box, which covers the input.
_OPENER = (
    "xpath=ancestor-or-self::*"
    "[contains(concat(' ', normalize-space(@class), ' '), ' ant-select-selector ')][1]"
)


def apply_choice(page: Any, selectors: Selectors, choice: ChatChoice) -> None:
    """Set the page up as `choice` asks; raise HardError when it cannot be done."""
    if choice.model:
        choose_model(page, selectors, choice.model)
    set_thinking(page, selectors, choice.thinking)
    if choice.web_search:
        # Only ever turned on: a new chat starts without it, and reading a mode menu's state is
        # a guess that must not stand between the default setup and every send.
        set_web_search(page, selectors, on=True)


def choose_model(page: Any, selectors: Selectors, wanted: str) -> None:
    """Pick `wanted` (as the picker names it) in the model picker, unless it is already chosen."""
    default = 'qwen.model = "" for the site\'s default model'
    picker = _needed(
        page, selectors, "model_picker", f"qwen.model = {wanted!r}", default, Code.NO_MODEL_PICKER
    )
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
            code=Code.MODEL_NOT_OFFERED,
        )
    if not _shows(lambda: same_model(wanted, chosen())):
        raise HardError(
            f"the model picker still shows {chosen()!r} after choosing {wanted!r}: not sending",
            code=Code.MODEL_NOT_CHOSEN,
        )


def set_thinking(page: Any, selectors: Selectors, thinking: str) -> None:
    """Set qwen.thinking ("auto" | "on" | "off") through the thinking select, or the older toggle.

    "auto" leaves the choice to the site: the select's "Auto" when the page has a select that
    shows another option (and offers "Auto"); nothing on a page with a toggle or without either.
    """
    select = _control(page, selectors.thinking_select)
    if select is not None:
        choose_thinking_option(page, selectors, select, thinking)
        return
    if thinking == "auto":
        return
    on = thinking == "on"
    setting = f"qwen.thinking = {thinking!r}"
    names = ("thinking_select", "thinking_toggle")
    toggle = _needed(page, selectors, names, setting, 'qwen.thinking = "auto"', Code.NO_THINKING_TOGGLE)
    if _is_on(toggle) == on:
        return
    toggle.click()
    if not _shows(lambda: _is_on(toggle) == on):
        raise HardError(
            f"the thinking toggle did not turn {thinking}: not sending", code=Code.THINKING_NOT_SET
        )


def choose_thinking_option(page: Any, selectors: Selectors, select: Any, thinking: str) -> None:
    """Pick THINKING_OPTIONS[thinking] in the thinking select, unless it is already chosen."""
    wanted = THINKING_OPTIONS[thinking]

    def chosen() -> str:
        return _first_line(select.evaluate(_SELECTED_JS))

    if _same_label(wanted, chosen()):
        return
    opener = select.locator(_OPENER)
    (opener.first if opener.count() else select).click()
    options = page.locator(selectors.thinking_option) if selectors.thinking_option else None
    names = _listed(options) if options is not None else []
    found = next((i for i, name in enumerate(names) if _same_label(wanted, name)), None)
    if found is None:
        page.keyboard.press("Escape")
        if thinking == "auto":  # the site's own default, whatever it is called
            return
        offered = ", ".join(repr(n) for n in names if n) or "no options"
        raise HardError(
            f"qwen.thinking = {thinking!r}: the thinking select has no {wanted!r} option "
            f"(it shows {offered}); set qwen.thinking to another value, or qwen.selectors.thinking_option",
            code=Code.THINKING_NOT_OFFERED,
        )
    options.nth(found).click()
    if not _shows(lambda: _same_label(wanted, chosen())):
        raise HardError(
            f"the thinking select still shows {chosen()!r} after choosing {wanted!r}: not sending",
            code=Code.THINKING_NOT_SET,
        )


def set_web_search(page: Any, selectors: Selectors, on: bool) -> None:
    """Turn web search on or off in the mode menu (whose label names the chosen mode)."""
    setting = f"qwen.web_search = {'true' if on else 'false'}"
    menu = _needed(page, selectors, "mode_menu", setting, "qwen.web_search = false", Code.NO_WEB_SEARCH)
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
            f"{WEB_SEARCH_LABEL!r} item (it shows {shown}); set qwen.web_search = false, in "
            "config.toml or the prompt's [qwen] table",
            code=Code.NO_WEB_SEARCH,
        )
    items.nth(found).click()
    if not _shows(lambda: _names_web_search(menu.inner_text()) == on):
        raise HardError(
            f"web search did not turn {'on' if on else 'off'} in the mode menu: not sending",
            code=Code.WEB_SEARCH_NOT_SET,
        )


def _needed(
    page: Any, selectors: Selectors, names: str | tuple[str, ...], setting: str, instead: str, code: Code
) -> Any:
    """The control the first of the `names` selectors finds, which `setting` needs; HardError
    (`code`) naming the selectors to set, or the setting to
    use `instead`, when none finds one."""
    names = (names,) if isinstance(names, str) else names
    for name in names:
        control = _control(page, getattr(selectors, name))
        if control is not None:
            return control
    shown = " nor ".join(f"{name.replace('_', ' ')} ({_which(selectors, name)})" for name in names)
    keys = " or ".join(f"qwen.selectors.{name}" for name in names)
    raise HardError(
        f"{setting}: the chat page shows no {shown}; set {keys}, or {instead}",
        code=code,
    )


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


def _same_label(wanted: str, shown: str) -> bool:
    return " ".join(wanted.lower().split()) == " ".join(shown.lower().split())


def _names_web_search(text: str) -> bool:
    return WEB_SEARCH_LABEL.lower() in " ".join(text.lower().split())


def _first_line(text: str) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")


def _which(selectors: Selectors, name: str) -> str:
    css = getattr(selectors, name)
    return css if css else f"the {selectors.name!r} UI has none"
