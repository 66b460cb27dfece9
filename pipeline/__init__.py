"""qwenpipe: generate articles with the chat.qwen.ai web chat, unattended, paying once per prompt."""

__version__ = "0.1.0"
