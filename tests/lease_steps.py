"""A step run under a shared batch's lease, and the lease lost under it (tests/unit/test_leases.py,
test_multi_turn.py): the contract's Step as generate builds it, handed a lease the test controls."""

from __future__ import annotations

import time

from pipeline.contract.hosts import ArticleLease
from pipeline.contract.prompts import load_prompt
from pipeline.contract.step import Step

OTHER_HOST = "h2:1:abcd"  # the owner token of the host that takes a lease over


def leased_step(workspace, engines, lease, slug: str = "tea") -> Step:
    """The step of `slug` (not waiting, any engine, quiet, the real clock) under `lease`."""
    return Step(
        workspace,
        workspace.article(slug),
        load_prompt(workspace.prompts_dir, slug),
        engines,
        wait=False,
        choice="auto",
        say=lambda _m: None,
        clock=time.time,
        lease=lease,
    )


def paused_lease(store, slug: str = "tea", host: str = "h1") -> ArticleLease:
    """`slug`'s lease claimed by `host`, then paused (no renewal): a host stopped past it."""
    lease = ArticleLease(store, slug, host, 30)
    assert lease.claim() == ""
    lease._stop.set()
    return lease


def take_over(store, lease: ArticleLease) -> None:
    """Another host takes `lease` over, as when it expired while its owner was stopped."""
    store.release_lease(lease.slug, lease.owner)
    assert store.claim_lease(lease.slug, OTHER_HOST, 30, time.time())
