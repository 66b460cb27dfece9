"""The one place that knows what chat.qwen.ai looks like: selectors and failure texts.

Two generations of the UI are seen in public code (docs/qwen-site.md); the driver tries the
built-in sets in order and uses the first whose composer is on the page. Within the current
generation each selector leads with the page as captured live on 2026-08-09 and keeps the older
shapes as fallbacks (a CSS list: whichever is on the page matches). The site changes often, so
config.toml can replace any selector by name (`[qwen.selectors]`).

An empty selector means "this UI has no such element": the completion rule that needs it is
skipped rather than failing (the legacy UI has no stop or copy button).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


class SelectorError(ValueError):
    """config.toml names a selector that does not exist."""


@dataclass(frozen=True)
class Selectors:
    """CSS selectors of one UI generation. Names are the keys of `[qwen.selectors]`."""

    name: str
    composer: str
    send_button: str
    stop_button: str
    user_turn: str
    assistant_turn: str
    answer: str  # the answer phase of an assistant turn
    answer_markdown: str  # the rendered markdown inside `answer` ("" = `answer` itself)
    thinking: str
    copy_button: str
    login: str = ".login-container"
    # Chosen before the first send (qwen.model, qwen.thinking, qwen.web_search).
    model_picker: str = ""  # clicked to open the model list
    model_label: str = ""  # inside model_picker: names the chosen model ("" = the picker's text)
    model_option: str = ""  # one model of the open list; its first line is the model's name
    # The live page's thinking control: a select (Auto / Thinking / Fast) whose box names the
    # chosen option; the driver tries it first and falls back to the older toggle button.
    thinking_select: str = ""
    thinking_option: str = ""  # one option of the open select; its first line is the option's name
    thinking_toggle: str = ""  # on when aria-pressed/aria-checked is "true" or it has class "active"
    mode_menu: str = ""  # opens the mode list (web search, deep research...); names the chosen mode
    mode_item: str = ""  # one mode of the open list ("Web Search", ...)
    # The sidebar of a logged-in page: never clicked, only checked by `doctor` (they tell the app
    # from a page that merely has a text box).
    new_chat: str = ""
    chat_item: str = ""  # one chat of the list (none on an account without chats)
    user_menu: str = ""

    def named(self) -> dict[str, str]:
        """Every selector by name (what `doctor` reports one by one)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"}

    def answer_text(self) -> str:
        """Where the answer's visible text lives inside an assistant turn."""
        if self.answer_markdown:
            return f"{self.answer} {self.answer_markdown}"
        return self.answer


CURRENT = Selectors(
    name="current",
    composer="textarea.message-input-textarea",
    # Live (2026-08-09): the send and stop buttons are known by their aria-label. Late 2026 as
    # public clients saw it: the send button may sit inside .message-input-right-button-send
    # (where the stop button replaces it while generating). Earlier: their own classes.
    send_button=(
        'button[aria-label*="Send" i], button.send-button, '
        '.message-input-right-button-send button:not([aria-label="Stop"])'
    ),
    stop_button='[aria-label="Stop"], button.stop-button',
    # Whole class names, never a substring: the "Qwen Studio" page (late September 2026) wraps
    # each turn in .qwen-chat-message-select-turn(-message), and its tool cards have "thinking"
    # in their class (docs/qwen-site.md, "Late autumn 2026").
    user_turn=".qwen-chat-message-user",
    assistant_turn=".qwen-chat-message-assistant",
    answer=".response-message-content.phase-answer",
    answer_markdown=".qwen-markdown",
    thinking=".response-message-content.phase-thinking",
    copy_button=".copy-response-button",  # its presence counts: it stays hidden until a hover
    model_picker='#qwen-chat-header-left [aria-label="Select Model"]',
    model_label='[class*="model-selector-text"]',
    model_option='[role="listbox"] [role="option"]',
    # An Ant Design select; its options are drawn in a dropdown elsewhere in the document.
    thinking_select='input[role="combobox"][aria-label="Thinking"]',
    thinking_option=".ant-select-dropdown:not(.ant-select-dropdown-hidden) .ant-select-item-option",
    thinking_toggle='button[aria-label="Thinking"]',
    # The live page's "+" menu (mode-select) has no "Web Search" item: web search is refused there.
    mode_menu="div.mode-select-open",
    mode_item=".mode-select-dropdown-item",
    new_chat='[aria-label="New Chat"]',
    chat_item='a.chat-item-drag-link[aria-label="chat-item"]',
    user_menu="button.user-menu-btn",
)

LEGACY = Selectors(
    name="legacy",
    composer="textarea#chat-input",
    send_button="#send-message-button",
    stop_button="",
    user_turn="",
    assistant_turn="[id^='chat-response-message-']",
    answer=".response-message-content",
    answer_markdown="",
    thinking="",
    copy_button="",
)

BUILT_IN: tuple[Selectors, ...] = (CURRENT, LEGACY)


@dataclass(frozen=True)
class FailureTexts:
    """What the site shows when it will not answer (matched case-insensitively)."""

    bot_check_title: str = "Verification"
    bot_check: str = "Please complete the operation to verify that you are a real person"
    # Late 2026 (docs/qwen-site.md, "Bot checks"): the connect-in-order puzzle has no slider.
    bot_check_more: tuple[str, ...] = ("Please connect them in order",)
    # Any of the check's widgets on the page: the overlay the late-2026 site lays over the page
    # when it refuses a send (its iframe shows the slider or the puzzle), the slider's handle, the
    # QR code deny page's form (it posts to the punish page).
    bot_check_frame: str = (
        'iframe#baxia-dialog-content, #baxia-dialog, iframe[src*="_____tmd_____"], '
        'iframe[src*="punish"], iframe[src*="captcha"], #nc_1_n1z, form[action*="_____tmd_____"]'
    )
    quota: str = "You've reached the upper limit for today's usage"
    waf_marker: str = "aliyun_waf_aa"
    chat_not_found: str = "is not exist"
    error_banner: str = "Something went wrong"


FAILURE_TEXTS = FailureTexts()

# The mode menu's item that turns web search on (the menu shows it as its label once chosen).
WEB_SEARCH_LABEL = "Web Search"
# The thinking select's option for each qwen.thinking ("auto": the site decides).
THINKING_OPTIONS = {"auto": "Auto", "on": "Thinking", "off": "Fast"}


def selector_names() -> list[str]:
    return list(CURRENT.named())


def merge_overrides(overrides: dict[str, str] | None) -> tuple[Selectors, ...]:
    """The selector sets to try, in order, given `qwen.selectors` from config.toml.

    No overrides: the built-in sets. With overrides: one set named "config", the current UI with
    the named selectors replaced, which *replaces* the built-in sets (a user who describes the
    page knows better than our guesses, and a half-matching fallback would hide the mistake).
    """
    if not overrides:
        return BUILT_IN
    known = selector_names()
    for name, value in overrides.items():
        if name not in known:
            raise SelectorError(f"qwen.selectors.{name}: no such selector (known: {', '.join(known)})")
        if not isinstance(value, str):
            raise SelectorError(f"qwen.selectors.{name} must be a string of CSS, not {value!r}")
    return (replace(CURRENT, name="config", **overrides),)
