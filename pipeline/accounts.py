"""The chat accounts a setup has: `[accounts.NAME]` tables, or the one account `default` made
of `[browser]`'s profile and saved login when there are none (setups from before accounts work
unchanged).

An account is only what the config says about it. Whether it is logged in, how many sends it
has left today and whether the site blocked it are facts the engine, the store and the quota
record know; rotation and affinity (which account sends, which one polls) read those.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from .config import Config, ConfigError

DEFAULT_ACCOUNT = "default"


class Account(NamedTuple):
    name: str
    profile_dir: Path  # absolute: relative paths are taken from config.toml's folder
    storage_state: Path
    max_sends_per_day: int  # this account's own limit; 0 = none (qwen.max_sends_per_day is the total)
    enabled: bool
    configured: bool  # False for the implicit `default` made of [browser]'s keys
    proxy: str = ""  # its browser's proxy URL (pipeline.proxy); "" = none
    send_hours: str = ""  # when it may send (pipeline/send_hours.py); "" = any time

    @property
    def where(self) -> str:
        """The config place a message names for this account's keys."""
        return f"[accounts.{self.name}]" if self.configured else "[browser]"


def all_accounts(config: Config) -> tuple[Account, ...]:
    """Every account, in the file's order (the fixed order that breaks ties in rotation).

    Made once per Config, as its sections are (it is frozen): status and the cycle ask for each
    of 10,000 articles, and each Account resolves two paths."""
    known = config.__dict__.get(_ACCOUNTS_OF)
    if known is None:
        known = config.__dict__[_ACCOUNTS_OF] = _accounts_of(config)
    return known


_ACCOUNTS_OF = "_all_accounts"  # where all_accounts keeps them in the Config (as cached_property does)


def _accounts_of(config: Config) -> tuple[Account, ...]:
    tables = config.accounts
    if not tables:
        return (
            Account(
                name=DEFAULT_ACCOUNT,
                profile_dir=config.resolve(config.browser.profile_dir),
                storage_state=config.resolve(config.browser.storage_state),
                max_sends_per_day=0,
                enabled=True,
                configured=False,
                proxy=config.browser.proxy,
                send_hours=config.qwen.send_hours,
            ),
        )
    return tuple(
        Account(
            name=name,
            profile_dir=config.resolve(settings.profile_dir),
            storage_state=config.resolve(settings.storage_state),
            max_sends_per_day=settings.max_sends_per_day,
            enabled=settings.enabled,
            configured=True,
            proxy=settings.proxy,
            send_hours=settings.send_hours or config.qwen.send_hours,
        )
        for name, settings in tables.items()
    )


def account_named(config: Config, name: str) -> Account:
    """One account by name; ConfigError naming the accounts there are when it is not one."""
    accounts = all_accounts(config)
    for account in accounts:
        if account.name == name:
            return account
    known = ", ".join(a.name for a in accounts)
    raise ConfigError(
        f"no account {name!r} (the accounts are: {known}): name one of them, "
        f"or add an [accounts.{name}] table to {config.describe()}"
    )


def account_config(config: Config, account: Account) -> Config:
    """The config as the account's engine sees it: [browser]'s profile, saved login and proxy
    are the account's (the `default` account's are [browser]'s own: the config unchanged).
    Everything that reads them (the engine, the login refresh, doctor) then serves that account
    alone."""
    if not account.configured:
        return config
    return (
        config.with_override("browser", "profile_dir", str(account.profile_dir), account.where)
        .with_override("browser", "storage_state", str(account.storage_state), account.where)
        .with_override("browser", "proxy", account.proxy, account.where)
    )


def proxy_secrets(config: Config) -> tuple[str, ...]:
    """The passwords of every account's proxy (as written and decoded), for masking."""
    from .proxy import secrets

    return tuple(secret for account in all_accounts(config) for secret in secrets(account.proxy))


def config_account(config: Config) -> str:
    """The account an account_config() serves: the one whose saved login its [browser] names
    (the first account for the config itself)."""
    accounts = all_accounts(config)
    state = config.resolve(config.browser.storage_state)
    for account in accounts:
        if account.storage_state == state:
            return account.name
    return accounts[0].name


def several(config: Config) -> bool:
    """More than one account: a cycle then runs one browser with a context per account."""
    return len(all_accounts(config)) > 1


def saved_login_problem(config: Config, account: Account) -> str:
    """Why an account surely cannot send ("" when it may: the site has the last word). Only
    with several accounts, whose browser contexts start from their saved login alone: one
    account runs on its persistent profile, which may be logged in without the file."""
    if not several(config) or account.storage_state.is_file():
        return ""
    return (
        f"account {account.name} has no saved login ({account.storage_state} does not exist): "
        f"run `qwenpipe login --account {account.name}`"
    )
