"""Engines: the chat (qwen, Playwright) and the router (OpenAI-compatible HTTP)."""
