"""Prompt files: `prompts/SLUG.md`, optionally opening with TOML front matter between `+++` lines."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import field
from pathlib import Path

from .. import files
from ..errors import UsageProblem
from ..records import record

SLUG_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
FENCE = "+++"
TURN_SEPARATOR = "=== next turn ==="  # a line of its own between the turns of a multi-turn prompt
MAX_PROMPT_BYTES = 1_000_000
# The [qwen] keys a prompt's front matter may override: how its chat answers.
PROMPT_QWEN_KEYS = ("model", "thinking", "web_search")


MAX_SLUG = 200  # SLUG.md.sending and friends must stay within a file system's 255-byte names


def check_slug(slug: str) -> str:
    """Return `slug` if it is a safe file name stem, else raise UsageProblem saying why."""
    if is_slug(slug):
        return slug
    if SLUG_RE.fullmatch(slug or ""):
        raise UsageProblem(f"invalid slug {slug[:40]}...: {len(slug)} characters, at most {MAX_SLUG}")
    hint = ""
    stem = Path(slug).name.removesuffix(".md") if slug else ""
    if stem and stem != slug and SLUG_RE.fullmatch(stem):
        hint = f" (did you mean `{stem}`? pass the slug, not a path)"
    raise UsageProblem(
        f"invalid slug {slug!r}: a slug is the prompt's file name without .md, made of "
        f"a-z, 0-9, '.', '_' and '-', starting with a letter or digit{hint}"
    )


def is_folder_notes(name: str) -> bool:
    """`README.md` (any case) in prompts/ is the folder's own notes, never a prompt: a folder
    that documents itself must not make every cycle fail."""
    return name.lower() == "readme.md"


def is_slug(text: str) -> bool:
    """True when `text` is a safe file name stem (what check_slug accepts; no exception raised
    for the 10,000 names of a batch scan)."""
    return bool(text) and len(text) <= MAX_SLUG and SLUG_RE.fullmatch(text) is not None


def name_problem(path: Path) -> str:
    """Why the prompt file `path` is never sent, and the name under which it would be."""
    stem = path.name.removesuffix(".md")
    wanted = re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).lstrip("._-")[:200].rstrip("-")
    fix = f"rename it to {path.with_name(wanted + '.md')}" if is_slug(wanted) else "rename it"
    return (
        f"{path}: {stem!r} is not a prompt name (a-z, 0-9, '.', '_' and '-', starting with a "
        f"letter or digit, at most 200 characters), so it is never sent; {fix}"
    )


@record(frozen=True)
class Prompt:
    slug: str
    path: Path
    text: str
    meta: dict = field(default_factory=dict)  # carried into the article's front matter
    settings: dict = field(default_factory=dict)  # the prompt's [article] table: overrides config
    qwen: dict = field(default_factory=dict)  # the prompt's [qwen] table (PROMPT_QWEN_KEYS)
    turns: tuple[str, ...] = ()  # the messages to send, in order (one for most prompts)

    def __post_init__(self) -> None:
        if not self.turns:
            object.__setattr__(self, "turns", (self.text,))

    @property
    def article_turn(self) -> int:
        """1-based turn whose answer is the article (article.answer_turn; 0 = the last)."""
        wanted = self.settings.get("answer_turn", 0)
        return wanted or len(self.turns)

    @property
    def sha256(self) -> str:
        import hashlib  # OpenSSL: loaded when a prompt is sent, not by a cycle that sends none

        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def split_front_matter(raw: str, where: Path) -> tuple[dict, str]:
    """(front matter, body). Front matter is TOML between a first line `+++` and the next `+++`."""
    lines = raw.splitlines(keepends=True)
    if not lines or lines[0].strip() != FENCE:
        return {}, raw
    for index in range(1, len(lines)):
        if lines[index].strip() == FENCE:
            block = "".join(lines[1:index])
            try:
                meta = tomllib.loads(block)
            except (tomllib.TOMLDecodeError, ValueError) as err:  # ValueError: a 4300+ digit integer
                raise UsageProblem(
                    f"{where}: front matter is not valid TOML: {_file_lines(str(err), index + 1)}"
                ) from None
            return meta, "".join(lines[index + 1 :])
    raise UsageProblem(f"{where}: front matter opened with `+++` on line 1 is never closed by a `+++` line")


def _file_lines(message: str, closing_line: int) -> str:
    """tomllib's message with the file's line numbers: the front matter starts on line 2, after
    the `+++` line, and "end of document" is the closing `+++` on `closing_line`."""
    message = re.sub(r"\(at line (\d+),", lambda m: f"(at line {int(m[1]) + 1},", message)
    return message.replace("(at end of document)", f"(at line {closing_line}, the closing `+++`)")


def load_prompt(prompts_dir: Path, slug: str) -> Prompt:
    """Read and check `prompts_dir/slug.md`. Raises UsageProblem for every bad case."""
    check_slug(slug)
    path = prompts_dir / f"{slug}.md"
    try:
        # The user's own file: a symlink to it is followed, but a FIFO never hangs the run.
        raw_bytes = files.read_bytes(path, follow=True)
    except FileNotFoundError:
        raise UsageProblem(
            f"no prompt for {slug!r}: {path} does not exist (write the prompt there)"
        ) from None
    except files.UnsafeFile as bad:
        raise UsageProblem(f"{path} is {bad.kind}, not a prompt file: make it a text file") from None
    except OSError as err:
        raise UsageProblem(f"{path}: cannot read: {err.strerror}") from None
    if len(raw_bytes) > MAX_PROMPT_BYTES:
        raise UsageProblem(f"{path}: {len(raw_bytes):,} bytes is too large for a chat prompt (max 1 MB)")
    try:
        raw = raw_bytes.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UsageProblem(f"{path}: not UTF-8 text (byte {err.start}); save the file as UTF-8") from None
    return parse_prompt(slug, path, raw)


def parse_prompt(slug: str, path: Path, raw: str) -> Prompt:
    """The prompt that the text `raw` of `path` makes (what load_prompt checks once the file is
    read; `new` and `import` check what they are about to write with it). Raises UsageProblem."""
    if len(raw.encode("utf-8")) > MAX_PROMPT_BYTES:
        raise UsageProblem(f"{path}: too large for a chat prompt (max 1 MB)")
    if "\x00" in raw:
        raise UsageProblem(f"{path}: contains NUL bytes; is it really a text prompt?")
    meta, body = split_front_matter(raw, path)
    text = body.strip()
    if not text:
        raise UsageProblem(f"{path}: the prompt is empty (write the request below the front matter)")
    settings = _table_settings("article", meta.pop("article", {}), path)
    qwen = _table_settings("qwen", meta.pop("qwen", {}), path, PROMPT_QWEN_KEYS)
    turns = split_turns(text, path)
    if settings.get("answer_turn", 0) > len(turns):
        raise UsageProblem(
            f"{path}: article.answer_turn = {settings['answer_turn']} but the prompt has {len(turns)} turn(s)"
        )
    return Prompt(slug=slug, path=path, text=text, meta=meta, settings=settings, qwen=qwen, turns=turns)


# The JSON the chat page POSTs to /api/v2/chat/completions for one turn, as the site's own
# frontend writes it (docs/qwen-site.md): the turn's text is its one message. The ids are the
# longest they can be (UUIDs; a later turn names the message it follows), so the estimate is
# never short of the body the page sends.
_REQUEST_SHAPE = {
    "stream": True,
    "incremental_output": True,
    "chat_id": "00000000-0000-0000-0000-000000000000",
    "chat_mode": "normal",
    "model": "qwen3-max-2026-01-01-preview",
    "chat_type": "search",
    "feature_config": {"thinking_enabled": True, "output_schema": "phase"},
    "parent_id": "00000000-0000-0000-0000-000000000000",
    "messages": [{"role": "user", "content": "", "chat_type": "search"}],
    "timestamp": 1_800_000_000,
}
_REQUEST_OVERHEAD = len(json.dumps(_REQUEST_SHAPE, separators=(",", ":")).encode("utf-8"))


def request_body_bytes(text: str) -> int:
    """The size in bytes of the completion request that sends `text` as one turn: the UTF-8
    JSON the browser sends (JSON.stringify: quotes, backslashes and control characters
    escaped, every other character as its UTF-8 bytes)."""
    content = json.dumps(text, ensure_ascii=False)  # with its two quotes, which the shape has too
    return _REQUEST_OVERHEAD - 2 + len(content.encode("utf-8", "surrogatepass"))


def request_size_problem(prompt: Prompt, limit: int, first_turn: int = 1) -> str:
    """What is wrong with the first turn from `first_turn` (1-based) whose chat request would be
    over `limit` bytes (qwen.max_prompt_bytes), with the fix; "" when none is."""
    total = len(prompt.turns)
    for number in range(max(1, first_turn), total + 1):
        size = request_body_bytes(prompt.turns[number - 1])
        if size > limit:
            which = f"turn {number} of {total}" if total > 1 else "the prompt"
            return (
                f"{prompt.path}: {which} makes a chat request of {size:,} bytes, over "
                f"qwen.max_prompt_bytes = {limit:,} (the site meets larger sends with its slider "
                f"captcha): shorten it or split it into turns ({TURN_SEPARATOR!r} lines), or "
                f"have the router write it (qwenpipe generate {prompt.slug} --engine router)"
            )
    return ""


def check_request_size(prompt: Prompt, limit: int, first_turn: int = 1) -> None:
    """UsageProblem (exit 2, nothing sent) when a turn from `first_turn` is too large for the
    chat (request_size_problem): the site answers such a send with its slider captcha, a strike
    against the account."""
    problem = request_size_problem(prompt, limit, first_turn)
    if problem:
        raise UsageProblem(f"{problem}; nothing was sent")


def split_turns(text: str, where: Path) -> tuple[str, ...]:
    """The turns of a prompt body, split on lines that are exactly TURN_SEPARATOR."""
    turns, current = [], []
    for line in text.splitlines():
        if line.strip() == TURN_SEPARATOR:
            turns.append("\n".join(current).strip())
            current = []
        else:
            current.append(line)
    turns.append("\n".join(current).strip())
    for number, turn in enumerate(turns, 1):
        if not turn:
            raise UsageProblem(
                f"{where}: turn {number} of {len(turns)} is empty (nothing between two "
                f"'{TURN_SEPARATOR}' lines, or one at the start or end)"
            )
    return tuple(turns)


def _table_settings(section: str, table: object, where: Path, keys: tuple[str, ...] = ()) -> dict:
    """The prompt's own `[section]` table, checked against the config schema's keys of that
    section (only `keys` of them, when given)."""
    from ..config import SCHEMA, ConfigError, check_value

    if not isinstance(table, dict):
        raise UsageProblem(f"{where}: `{section}` in the front matter must be a table [{section}]")
    known = {k: v for k, v in SCHEMA[section].items() if not keys or k in keys}
    settings = {}
    for key, value in table.items():
        if key not in known:
            raise UsageProblem(
                f"{where}: unknown key {section}.{key} in the front matter (known: {', '.join(known)})"
            )
        try:
            settings[key] = check_value(f"{section}.{key}", known[key], value, where)
        except ConfigError as err:
            raise UsageProblem(str(err)) from None
    return settings


def list_slugs(prompts_dir: Path) -> list[str]:
    """Slugs of every valid prompt file name in the folder, sorted; other files are ignored."""
    try:
        names = [entry.name for entry in prompts_dir.iterdir() if entry.is_file()]
    except FileNotFoundError:
        return []
    return sorted(n[:-3] for n in names if n.endswith(".md") and not is_folder_notes(n) and is_slug(n[:-3]))
