"""One mask on everything kept, through the real CLI: whatever path puts an error text into a
record, no file the project or its published site holds keeps a piece of the router key.

The paths that put an error text into a record: a router that quotes the key in its 401 body
(the dead letter, the article's record, the journal), a publish.after and a
publish.after_cycle command that print the key and fail (the publish record,
publish_after_cycle.json, the journal), a notification that cannot be delivered (notify.json's
messages and its error), and the cycle's own files (last_cycle.json, the metrics). The hook
prints the key in each form in turn: whole, in 9-character pieces on lines of their own,
base64 and URL-encoded; after every command every file under the project and the site is read
as bytes (the SQLite database included, and a -wal left by a run), and its name too, for any MIN_RUN
characters in a row of any form of the key.
"""

from __future__ import annotations

import base64
import json
import socket
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from publish_helpers import done_article
from sim_project import make_project, prompt
from tests_cli_helpers import qwenpipe_in_process

from pipeline.redact import MASK, MIN_RUN

pytestmark = pytest.mark.browser

# Logged out: the cycle's chat attempt fails hard at once and falls back to the router.
SIMULATOR = {"scenario": "logged_out", "answer_seconds": 1.0, "url_delay": 0.1}  # conftest.py `sim`

# Characters URL encoding and base64 both change, so that every form differs from the key.
KEY = "Hb4+Nc/Ertyu=Wq7+Plokij/Uhygt=Frdes+Zx90/8765=4321+Mnbvc/Xzlkj=Poiuy"
HOOK_FORMS = ("whole", "pieces", "base64", "urlencoded")
ROUTER_FORMS = {"pieces": "from_second", "base64": "base64", "urlencoded": "urlencoded"}

HOOK = """
import base64, os, sys
from pathlib import Path
from urllib.parse import quote

key = os.environ["ROUTER_API_KEY"]
form = Path(sys.argv[1]).read_text().strip()
if sys.argv[2].endswith("ok.md"):  # one page whose command succeeds: the cycle published one
    sys.exit(0)
if form == "whole":
    print("push refused: remote said the token", key, "is invalid")
elif form == "pieces":
    print("push refused, the token:")
    for at in range(0, len(key), 9):
        print(key[at : at + 9])
elif form == "base64":
    print("Authorization: Basic", base64.b64encode(key.encode()).decode())
else:
    print("GET /push?token=" + quote(key, safe=""))
sys.exit(1)
"""


def key_pieces(key: str = KEY) -> set[str]:
    """Every MIN_RUN characters in a row of the key as it is, URL-encoded, or base64 (in the three
    alignments it may have inside longer encoded data)."""
    forms = [key, quote(key, safe="")]
    for shift in range(3):
        whole = (shift + len(key)) // 3 * 4
        forms.append(base64.b64encode(b"\0" * shift + key.encode()).decode()[4 if shift else 0 : whole])
    return {form[at : at + MIN_RUN] for form in forms for at in range(len(form) - MIN_RUN + 1)}


PIECES = key_pieces()


def leaks(*folders: Path) -> dict[str, list[str]]:
    """Each file under `folders` (recursively, by its bytes and its name) holding a piece of the key."""
    found = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            text = path.name + (path.read_bytes().decode("latin-1") if path.is_file() else "")
            pieces = sorted(piece for piece in PIECES if piece in text)
            if pieces:
                found[str(path.relative_to(folder.parent))] = pieces[:3]
    return found


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(autouse=True)
def fresh_router(sim):
    sim.router.reset()


def test_no_file_the_project_or_its_site_keeps_holds_a_piece_of_the_key(sim, tmp_path):
    sim.set(router_scenario="echo_key", router_fail_times=1000)
    project = make_project(tmp_path / "project", sim)
    site = tmp_path / "site"
    hook, form = tmp_path / "hook.py", tmp_path / "form"  # outside both folders: they are scanned
    hook.write_text(HOOK)
    command = f"{sys.executable} {hook} {form}"
    config = project / "config.toml"
    config.write_text(
        config.read_text().replace("max_attempts = 3", "max_attempts = 1")  # dead-lettered at once
        + f"""
[publish]
dir = "{site}"
after = "{command} {{path}}"
after_cycle = "{command} {{dir}}"
after_timeout = 60

[notify]
urls = ["json://127.0.0.1:{closed_port()}/hook"]

[metrics]
textfile = "metrics.prom"
"""
    )
    prompt(project, "tea", "Write an article about green tea.")
    prompt(project, "pub", "Write an article about brewing.")
    done_article(project, "pub")
    prompt(project, "ok", "Write an article about cups.")
    done_article(project, "ok")
    env = {"ROUTER_API_KEY": KEY}
    state = project / "articles" / ".qwenpipe"

    def run(*args: str) -> str:
        ran = qwenpipe_in_process(*args, cwd=project, env=env)
        assert "Traceback" not in ran.stderr, ran.stderr
        assert not [p for p in PIECES if p in ran.stdout + ran.stderr], ran.stderr
        found = leaks(project, site)
        assert not found, f"after `qwenpipe {' '.join(args)}` (hook form {form.read_text()}): {found}"
        return ran.stderr

    form.write_text("whole")
    said = run("cycle")  # the chat is logged out: the router answers 401 quoting the key
    assert "tea.md.failed" in {p.name for p in (project / "articles").iterdir()}
    assert (site / "pub.md").is_file() and "publish.after exited 1" in said, said
    kept = {
        "publish record": state / "published" / "pub.json",
        "after_cycle record": state / "publish_after_cycle.json",
        "notify outbox": state / "notify.json",
        "dead letter": project / "articles" / "tea.md.failed",
    }
    for name, path in kept.items():  # the error text really reached each record, masked
        assert MASK in path.read_text(), (name, path.read_text())
    assert json.loads((state / "notify.json").read_text())["pending"], "the notification was not kept"
    assert (project / "metrics.prom").is_file() and (state / "last_cycle.json").is_file()
    # The database is read too; its -wal is checkpointed when a run ends (the store tests read one).
    assert (state / "qwenpipe.db").is_file()

    for shape in HOOK_FORMS[1:]:
        form.write_text(shape)
        sim.set(router_echo_form=ROUTER_FORMS[shape])
        slug = f"tea-{shape}"
        prompt(project, slug, "Write an article about green tea.")
        run("generate", slug, "--engine", "router")  # dead-lettered, its error quoting the key
        said = run("publish", "pub")  # its failed publish.after runs again
        assert "publish.after exited 1" in said, said
        run("cycle")  # publish.after_cycle again, the dead letter told (and not delivered)
        assert MASK in (state / "published" / "pub.json").read_text()
        assert MASK in (state / "publish_after_cycle.json").read_text()
    assert len(sim.router.chat_requests()) == 4
