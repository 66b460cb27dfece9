"""[accounts.NAME] tables: defaults, order, the implicit `default` account, and clear errors."""

from __future__ import annotations

import pytest

from pipeline.accounts import DEFAULT_ACCOUNT, account_named, all_accounts
from pipeline.config import ConfigError, load


def _load(tmp_path, text: str):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load(path)


def test_without_accounts_tables_the_browser_profile_is_the_one_default_account(tmp_path):
    config = _load(tmp_path, '[browser]\nprofile_dir = "p"\nstorage_state = "s.json"\n')
    (account,) = all_accounts(config)
    assert account.name == DEFAULT_ACCOUNT and not account.configured
    assert account.profile_dir == tmp_path / "p" and account.storage_state == tmp_path / "s.json"
    assert account.enabled and account.max_sends_per_day == 0


def test_accounts_keep_the_files_order_and_take_their_defaults_from_their_names(tmp_path):
    config = _load(
        tmp_path,
        '[accounts.zeta]\nmax_sends_per_day = 3\n[accounts.alpha]\nenabled = false\nprofile_dir = "x"\n',
    )
    zeta, alpha = all_accounts(config)
    assert [zeta.name, alpha.name] == ["zeta", "alpha"]
    assert zeta.profile_dir == tmp_path / ".qwenpipe/accounts/zeta/profile"
    assert zeta.storage_state == tmp_path / ".qwenpipe/accounts/zeta/state.json"
    assert zeta.max_sends_per_day == 3 and zeta.enabled
    assert alpha.profile_dir == tmp_path / "x" and not alpha.enabled
    assert account_named(config, "alpha") == alpha


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[accounts.Main]\n", "[accounts.Main]: an account name is a-z"),
        ('[accounts]\nmain = "x"\n', "`accounts.main` must be a table"),
        ("accounts = 3\n", "`accounts` must be tables"),
        ("[accounts.main]\nprofile = 'x'\n", "unknown key accounts.main.profile"),
        ("[accounts.main]\nmax_sends_per_day = -1\n", "accounts.main.max_sends_per_day = -1 must be"),
        ("[accounts.main]\nenabled = 'yes'\n", "accounts.main.enabled = 'yes' must be true or false"),
    ],
)
def test_a_bad_accounts_table_names_the_key_and_the_fix(tmp_path, text, named):
    with pytest.raises(ConfigError, match="config.toml") as err:
        _load(tmp_path, text)
    assert named in str(err.value)


def test_an_unknown_account_name_lists_the_accounts_there_are(tmp_path):
    config = _load(tmp_path, "[accounts.main]\n[accounts.spare]\n")
    with pytest.raises(ConfigError, match=r"no account 'other' \(the accounts are: main, spare\)"):
        account_named(config, "other")


# -- a saved login of its own: never one of the project's files, never another account's -------

OWN_FILES = [
    ("config.toml", "is this config file"),
    ("prompts/tea.md", "is inside paths.prompts"),
    ("prompts", "is paths.prompts"),
    ("articles/tea.md", "is inside paths.articles"),
    ("articles/.qwenpipe/qwenpipe.db", "is inside paths.articles"),
    ("articles/../articles/tea.md.url", "is inside paths.articles"),
    ("site/posts/state.json", "is inside publish.dir"),
    ("{profile}/state.json", "is inside {table}.profile_dir"),  # the account's browser profile
]
PROFILES = {"browser": ".qwenpipe/profile", "accounts.main": ".qwenpipe/accounts/main/profile"}


@pytest.mark.parametrize("table", ["browser", "accounts.main"])
@pytest.mark.parametrize(("value", "said"), OWN_FILES)
def test_a_saved_login_that_is_one_of_the_projects_own_files_is_refused(tmp_path, table, value, said):
    value, said = value.format(profile=PROFILES[table]), said.format(table=table)
    key = f"{table}.storage_state"
    with pytest.raises(ConfigError) as refused:
        _load(tmp_path, f'[publish]\ndir = "site/posts"\n[{table}]\nstorage_state = "{value}"\n')
    message = " ".join(str(refused.value).split())
    assert f"{key} = {value!r}" in message and said in message, message
    assert "point it at a file of its own" in message


def test_a_saved_login_through_a_symlink_into_the_articles_is_refused(tmp_path):
    (tmp_path / "articles").mkdir()
    (tmp_path / "logins").symlink_to(tmp_path / "articles")
    with pytest.raises(ConfigError, match="is inside paths.articles"):
        _load(tmp_path, '[browser]\nstorage_state = "logins/state.json"\n')


@pytest.mark.parametrize(
    ("second", "said"),
    [
        ('storage_state = "shared/state.json"', "accounts.spare.storage_state = 'shared/state.json'"),
        (
            'storage_state = "./shared/../shared/state.json"',
            "is accounts.main.storage_state;",
        ),
        ('profile_dir = "shared/profile"', "accounts.spare.profile_dir = 'shared/profile'"),
    ],
)
def test_two_accounts_sharing_a_saved_login_or_a_profile_are_refused(tmp_path, second, said):
    text = '[accounts.main]\nstorage_state = "shared/state.json"\nprofile_dir = "shared/profile"\n'
    with pytest.raises(ConfigError) as refused:
        _load(tmp_path, f"{text}[accounts.spare]\n{second}\n")
    message = " ".join(str(refused.value).split())
    assert said in message and "accounts.main" in message and "of its own" in message, message


def test_separate_saved_logins_and_the_defaults_are_accepted(tmp_path):
    _load(tmp_path, "[accounts.main]\n[accounts.spare]\n")
    _load(tmp_path, '[publish]\ndir = "site/posts"\n[browser]\nstorage_state = "secrets/state.json"\n')
    _load(tmp_path, "")
