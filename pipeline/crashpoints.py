"""Named places where the chaos tests kill the process (QWENPIPE_CRASH_AT=name[,name...]).

Off unless the variable is set; the check is one dictionary lookup. The names are the step
boundaries that docs/reliability.md talks about.
"""

from __future__ import annotations

import os
import signal

NAMES = (
    "before_send",  # the intent marker is on disk, nothing typed yet
    "after_naming",  # the chat is named in the marker and the store, its completion not let go yet
    "after_send",  # the site took the prompt, the URL is not on disk yet
    "mid_article",  # the article's temporary file is written, not yet renamed
    "mid_journal",  # half a journal line is written
    "after_router",  # the router answered, the article is not written yet
)


def crashpoint(name: str) -> None:
    wanted = os.environ.get("QWENPIPE_CRASH_AT")
    if wanted and name in wanted.split(","):
        os.kill(os.getpid(), signal.SIGKILL)
