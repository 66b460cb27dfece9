"""A project of fake chat accounts for the contract's unit tests: config.toml as given, each of
its `[accounts.NAME]` tables signed in, a FakeChat per account and one FakeRouter."""

from __future__ import annotations

from fakes import FakeChat, FakeRouter
from project_files import write_config

from pipeline.config import load
from pipeline.contract.workspace import Engines
from pipeline.wiring import workspace as open_workspace


def accounts_project(project, config: str):
    """(workspace, {account: FakeChat}, router, a function that makes Engines over them). Without
    `[accounts.NAME]` tables the one chat is "default"; the nth account's chat numbers its sends
    from 1000 * n, so no two accounts ever make the same chat URL."""
    write_config(project, config)
    ws = open_workspace(load(project / "config.toml"))
    names = [line[10:-1] for line in config.splitlines() if line.startswith("[accounts.")]
    for name in names:
        state = project / ".qwenpipe" / "accounts" / name / "state.json"
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text("{}")
    chats = {name: FakeChat() for name in names or ["default"]}
    for i, chat in enumerate(chats.values()):
        chat.sends = 1000 * i
    router = FakeRouter()

    def engines() -> Engines:
        from pipeline.accounts import config_account

        return Engines(
            ws.config,
            chat_factory=lambda config: chats[config_account(config)],
            router_factory=lambda _c: router,
        )

    return ws, chats, router, engines
