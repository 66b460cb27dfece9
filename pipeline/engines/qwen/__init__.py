"""The chat.qwen.ai engine and everything it owns: the browser, the page, the site's API.

- `engine`: QwenEngine, the ChatEngine driven through Playwright: a facade over `pages` (the
  page's lifecycle), `sending` (the click and its proof), `observing` (one answer until it is
  complete), `judging` (a whole chat as turns) and `chats` (the account's chat list), which
  share the engine's settings, clock and noticed unknown answers through `context`.
- `browser`: the browser session (finding, launching or attaching Chromium) and saved logins.
- `login`: the one check "is this page logged in", used by the engine, `login` and `doctor`.
- `page`, `api`, `selectors`: reading the page, parsing the site's JSON, the page's selectors.

Nothing here imports Playwright until a browser is really needed.
"""
