"""The secrets this process knows, read where they are configured and registered for masking
(pipeline.redact): from then on nothing written to disk or out of the process shows them.

- the router key (`router_key`: its variable, else its file);
- every account's proxy password (accounts.proxy_secrets);
- PGPASSWORD, which the PostgreSQL driver reads for [store] url (the config refuses a password
  written into the URL itself);
- the tokens of [notify] urls (redact.url_tokens: an Apprise URL carries its bot token or
  webhook key in its parts, and a failed delivery may quote them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .accounts import proxy_secrets
from .config import Config, Router, RouterKey, read_router_key
from .redact import register, url_tokens


def router_key_found(
    settings: Router, env: Mapping[str, str] | None = None, *, private: bool = True
) -> RouterKey:
    """The router key and where it came from (config.read_router_key: the variable named by
    `settings.api_key_env`, else the file `settings.api_key_file`), registered. `private=False`:
    a key file others may read is read all the same (to mask the key, not to use it)."""
    found = read_router_key(settings, env, private=private)
    register(found.value)
    return found


def router_key(settings: Router, env: Mapping[str, str] | None = None) -> str | None:
    """The router key (router_key_found), registered; None if neither place has one."""
    return router_key_found(settings, env).value


def register_all(config: Config, env: Mapping[str, str] | None = None) -> None:
    """Register every secret `config` names (see the module), before anything is read or
    written: even a command that never talks to the router (status, show) masks its key."""
    environ = os.environ if env is None else env
    router_key_found(config.router, environ, private=False)  # masked even where it must not be used
    for secret in proxy_secrets(config):
        register(secret)
    if config.store.url:  # the PostgreSQL driver's password
        register(environ.get("PGPASSWORD"))
    for url in config.notify.urls:
        for token in url_tokens(url):
            register(token)
