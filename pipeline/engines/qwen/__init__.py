"""The chat.qwen.ai engine and everything it owns: the browser, the page, the site's API.

- `engine`: QwenEngine, the ChatEngine driven through Playwright.
- `browser`: the browser session (finding, launching or attaching Chromium) and saved logins.
- `login`: the one check "is this page logged in", used by the engine, `login` and `doctor`.
- `page`, `api`, `selectors`: reading the page, parsing the site's JSON, the page's selectors.

Nothing here imports Playwright until a browser is really needed.
"""
