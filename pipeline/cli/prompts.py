"""`qwenpipe new`, `qwenpipe import` and `qwenpipe publish`: from topics to prompts, from
articles to a site. The work is in pipeline/publishing/.

Exit codes: 0 done; 2 cannot run as asked (a bad slug, template, CSV file or row, a taken
slug or a title like a known topic's for `new`; nothing written for what was bad); 1
publishing failed (the article is kept). `import` reports the rows it refuses as like a known
topic, as it does the rows whose slug exists: not an error.
"""

# No `from __future__ import annotations`: Typer reads these annotations at runtime.
from pathlib import Path
from typing import Annotated

import typer

from ..console import out, say
from ..errors import UsageProblem
from ..exitcodes import ExitCode
from .common import ConfigOption, workspace_of

AllowSimilar = Annotated[
    bool,
    typer.Option(
        "--allow-similar",
        help="write it even when its title names a known topic (the same numbers and [topics] similar "
        "of its words)",
    ),
]


def new_command(
    ctx: typer.Context,
    slug: Annotated[str, typer.Argument(help="the new prompt's name: prompts/SLUG.md", metavar="SLUG")],
    title: Annotated[str, typer.Option("--title", help="the article's title ({title})")],
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="a tag ({tags}); repeat for more", metavar="TAG")
    ] = None,
    template: Annotated[
        str | None, typer.Option("--template", help="prompts/_templates/NAME.md (default: default)")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="another placeholder: --set keyword=matcha", metavar="KEY=VALUE"),
    ] = None,
    allow_similar: AllowSimilar = False,
    config: ConfigOption = None,
) -> None:
    """Write prompts/SLUG.md from a template (never overwrites: exit 2 if SLUG exists, or if
    the title names a known topic: the same numbers, and [topics] similar of its words)."""
    from ..publishing.templates import new_prompt

    workspace = workspace_of(ctx, config)
    path = new_prompt(
        workspace.prompts_dir,
        workspace.articles_dir,
        slug,
        title=title,
        tags=list(tag or []),
        template=template,
        sets=list(set_ or []),
        max_request_bytes=workspace.config.qwen.max_prompt_bytes,
        warn=say,
        similar=None if allow_similar else workspace.config.topics.similar,
        language=workspace.config.article.language,
    )
    out().print(str(path), markup=False)
    say(f"wrote {path}; the next cycle (or `qwenpipe generate {slug}`) sends it")


def import_command(
    ctx: typer.Context,
    source: Annotated[
        Path, typer.Argument(help="a CSV file with a header: title, [slug], [tags], ...", metavar="FILE")
    ],
    template: Annotated[
        str | None, typer.Option("--template", help="prompts/_templates/NAME.md (default: default)")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="check every row, write nothing")] = False,
    allow_similar: AllowSimilar = False,
    config: ConfigOption = None,
) -> None:
    """One prompt per CSV row; rows whose slug exists are skipped, rows naming a known topic
    refused, bad rows reported (exit 2)."""
    from ..publishing.topics import import_topics

    workspace = workspace_of(ctx, config)
    report = import_topics(
        workspace.prompts_dir,
        workspace.articles_dir,
        source,
        template,
        dry_run=dry_run,
        max_request_bytes=workspace.config.qwen.max_prompt_bytes,
        similar=None if allow_similar else workspace.config.topics.similar,
        language=workspace.config.article.language,
    )
    printed = out()
    for _slug, path in report.written:  # a dry run writes nothing: it says what it would
        printed.print(f"would write {path}" if dry_run else str(path), markup=False)
    for line in report.existing + report.similar + report.invalid + report.too_large + report.unused:
        say(line)
    say(report.summary())
    if report.invalid:
        raise typer.Exit(ExitCode.USAGE)


def publish_command(
    ctx: typer.Context,
    slug: Annotated[str | None, typer.Argument(help="the done article to publish", metavar="SLUG")] = None,
    all_done: Annotated[bool, typer.Option("--all", help="every done article")] = False,
    config: ConfigOption = None,
) -> None:
    """Copy done articles to publish.dir (when changed, never over a hand edit), then publish.after."""
    from ..publishing.publish import publish_by_hand

    if bool(slug) == all_done:
        raise UsageProblem("give one SLUG or --all")
    workspace = workspace_of(ctx, config)
    results = publish_by_hand(workspace, slug, say=say)
    # A page left alone because it was edited by hand was not published as asked: 1 too.
    if any(result.failed or result.status == "held" for result in results):
        raise typer.Exit(ExitCode.FAILED)
