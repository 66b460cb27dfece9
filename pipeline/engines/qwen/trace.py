"""A Playwright trace of the last run (`[browser] trace = true`), for `qwenpipe report`.

The trace records a browser context from its start to its close: each action, the page's
screenshots and DOM snapshots, and its network log, headers and cookies included. It is kept
as one file per account, replaced whole by each run that opened a browser (the last run only,
however many ran before), written atomically through pipeline.files, whose mask on what is kept
opens the zip and masks every member (redact.mask_kept): the router key, a proxy's password and
login tokens never reach the disk in it. The session cookie stays, as it does in the saved
login beside it (0600); `qwenpipe report` masks the saved logins' cookies too when it bundles it.

Only a context qwenpipe made is traced: a Chrome the user runs and qwenpipe attaches to
(`browser.cdp_url`) has tabs of the user's own in its context, which a trace would record.
A trace never costs a run: one that cannot be started, stopped or written is left out.
`pipeline.files` is imported where the file is written: the engines load without it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

TRACE_LIMIT = 200_000_000  # bytes: a larger trace (hours of screenshots) is not kept


def start_trace(context: Any) -> bool:
    """Start recording `context` (screenshots and DOM snapshots); False when Playwright refuses
    (a Chrome attached over CDP whose context is traced already)."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        context.tracing.start(screenshots=True, snapshots=True)
    except PlaywrightError:
        return False
    return True


def keep_trace(context: Any, path: Path) -> bool:
    """Stop recording `context` and put its trace at `path`, replacing the last run's, masked.
    False when there is none to keep (the browser is gone, the folder refuses it)."""
    from playwright.sync_api import Error as PlaywrightError

    from ... import files

    # Playwright's driver writes the file itself: beside `path`, named as files' temporaries are
    # (a sweep removes one a killed run left), then read, masked and moved into place whole.
    raw = path.with_name(f"{files.TMP_PREFIX}{path.name}.{os.urandom(4).hex()}")
    try:
        files.ensure_folder(path.parent)
        context.tracing.stop(path=str(raw))
        files.atomic_write(path, files.read_bytes(raw, limit=TRACE_LIMIT))
    except (PlaywrightError, OSError, files.SetupProblem):
        return False
    finally:
        try:
            os.unlink(raw)
        except OSError:
            pass
    return True
