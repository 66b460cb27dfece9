"""Deterministic answer text: the same prompt (and turn) always gets the same markdown.

Tests compare what the driver saved with `expected_answer`, so every answer is a pure function
of the prompt, the turn and the content scenario. Different prompts must give different answers
(the prompt is quoted and also seeds the word choices) so a stale or swapped answer shows.
"""

from __future__ import annotations

import hashlib
import re

SIM_TOKEN = re.compile(r"\[sim:([a-z_]+)\]")
REFUSAL = "I'm sorry, but I can't help with that request."
CHATTER_HEAD = "Sure! Here is your article:\n\n"
CHATTER_TAIL = "\n\nLet me know if you want any changes!"

_STOPWORDS = {
    "about",
    "above",
    "after",
    "again",
    "also",
    "article",
    "because",
    "before",
    "being",
    "below",
    "between",
    "could",
    "does",
    "doing",
    "every",
    "from",
    "have",
    "having",
    "into",
    "just",
    "make",
    "more",
    "most",
    "other",
    "over",
    "please",
    "should",
    "some",
    "such",
    "than",
    "that",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "under",
    "very",
    "what",
    "when",
    "where",
    "which",
    "while",
    "with",
    "would",
    "write",
    "your",
    "words",
    "short",
    "long",
}

_EN = {
    "titles": ["A Practical Guide", "What You Need to Know", "An Overview", "Key Ideas", "A Closer Look"],
    "open": [
        "This article answers the request",
        "Here we look at the question",
        "The following text is written for the prompt",
    ],
    "second": [
        "The main idea is simple: **{k0}** matters because it shapes how `{k1}` is used every day.",
        "Most readers meet **{k0}** first and only later see how it connects to `{k1}`.",
        "In short, **{k0}** is the starting point, and `{k1}` is where the details live.",
    ],
    "section": "Key points",
    "bullets": [
        "Start with the basics of {k}.",
        "Keep notes on {k} as you go.",
        "Compare {k} with what you already know.",
        "Revisit {k} after a week.",
        "Share what you learned about {k}.",
    ],
    "steps": ["Read about {k}.", "Try a small example with {k}.", "Write down what changed.", "Repeat."],
    "close": [
        "To sum up, {k0} rewards steady practice more than bursts of effort.",
        "In the end, a clear plan for {k0} saves time and avoids surprises.",
        "Taken together, these steps make {k0} easier to learn and to explain.",
    ],
    "turn": 'This is the follow-up answer for turn {turn}, written for the message "{quote}".',
    "title_nouns": ["Overview", "Notes", "Guide", "Basics", "Summary"],
    "short": ["{k0}.", "A short answer.", "That is all."],
}

_ES = {
    "titles": ["Una guía práctica", "Lo que hay que saber", "Una visión general", "Ideas clave"],
    "open": ["Este artículo responde a la petición", "Aquí vemos la pregunta", "El texto sigue la petición"],
    "second": [
        "La idea principal es sencilla: **{k0}** importa porque define cómo se usa `{k1}` cada día.",
        "Muchos lectores conocen **{k0}** primero y solo después ven su relación con `{k1}`.",
    ],
    "section": "Puntos clave",
    "bullets": [
        "Empieza por lo básico de {k}.",
        "Toma notas sobre {k} mientras avanzas.",
        "Compara {k} con lo que ya sabes.",
        "Vuelve a {k} después de una semana.",
    ],
    "steps": ["Lee sobre {k}.", "Prueba un ejemplo pequeño con {k}.", "Anota lo que cambió.", "Repite."],
    "close": [
        "En resumen, {k0} premia la práctica constante más que el esfuerzo puntual.",
        "Al final, un plan claro para {k0} ahorra tiempo y evita sorpresas.",
    ],
    "turn": 'Esta es la respuesta de seguimiento del turno {turn}, escrita para el mensaje "{quote}".',
    "title_nouns": ["Resumen", "Notas", "Guía"],
    "short": ["{k0}.", "Una respuesta corta.", "Eso es todo."],
}


def prompt_scenario(prompt: str) -> str | None:
    """The `[sim:NAME]` token in a prompt, if any (the caller checks NAME is known)."""
    match = SIM_TOKEN.search(prompt)
    return match.group(1) if match else None


def clean_prompt(prompt: str) -> str:
    """The prompt without `[sim:...]` tokens, whitespace collapsed (what answers quote)."""
    return " ".join(SIM_TOKEN.sub(" ", prompt).split())


def _seed(prompt: str, turn: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{turn}\x00{prompt}".encode()).digest()[:8], "big")


def _pick(options: list[str], seed: int, salt: int) -> str:
    return options[(seed >> (salt * 3)) % len(options)]


def keywords(prompt: str, count: int = 4) -> list[str]:
    """Distinct content words of the prompt, in order; never empty (fallback words)."""
    found: list[str] = []
    for word in re.findall(r"[^\W\d_]{4,}", clean_prompt(prompt)):
        lower = word.lower()
        if lower not in _STOPWORDS and lower not in found:
            found.append(lower)
    for filler in ("topic", "practice", "details", "examples"):
        if len(found) >= count:
            break
        if filler not in found:
            found.append(filler)
    return found[:count]


def quote(prompt: str, words: int = 14) -> str:
    """The beginning of the prompt, as the answer quotes it."""
    parts = clean_prompt(prompt).replace('"', "'").split()
    text = " ".join(parts[:words])
    return text + ("..." if len(parts) > words else "")


def _article(prompt: str, turn: int, lang: dict) -> str:
    seed = _seed(prompt, turn)
    k = keywords(prompt)
    head = f"{k[0].capitalize()} and {k[1].capitalize()}: {_pick(lang['titles'], seed, 1)}"
    intro = f'{_pick(lang["open"], seed, 2)} "{quote(prompt)}".'
    if turn > 1:
        intro += " " + lang["turn"].format(turn=turn, quote=quote(prompt))
    second = _pick(lang["second"], seed, 3).format(k0=k[0], k1=k[1])
    n_bullets = 3 + seed % 2
    bullets = [b.format(k=k[(i + 1) % len(k)]) for i, b in enumerate(lang["bullets"][:n_bullets])]
    steps = [s.format(k=k[i % len(k)]) for i, s in enumerate(lang["steps"][:3])]
    limit = 3 + seed % 7
    code = [
        "```python",
        f"def pick_{k[0]}(items, limit={limit}):",
        '    # keep the small ones; "<" and "&" must survive the page',
        "    return [x for x in items if x < limit and x != 0]",
        "```",
    ]
    close = _pick(lang["close"], seed, 4).format(k0=k[0])
    lines = [f"# {head}", "", intro, "", second, "", f"## {lang['section']}", ""]
    lines += [f"- {b}" for b in bullets] + [""]
    lines += [f"{i}. {s}" for i, s in enumerate(steps, 1)] + [""]
    lines += code + ["", close]
    return "\n".join(lines)


def expected_answer(prompt: str, turn: int = 1, scenario: str = "ok") -> str:
    """The exact raw markdown the chat answers for `prompt` at `turn` under a content scenario.

    For "error_banner" this is the full answer the chat *meant* to give; the chat stores only
    about half of it (see chats.py), which is how a cut-short answer can be detected.
    """
    if scenario == "refusal":
        return REFUSAL
    if scenario == "short":
        k = keywords(prompt)
        return "\n".join(line.format(k0=k[0].capitalize()) for line in _EN["short"])
    if scenario == "wrong_language":
        return _article(prompt, turn, _ES)
    if scenario == "chatter":
        return CHATTER_HEAD + _article(prompt, turn, _EN) + CHATTER_TAIL
    return _article(prompt, turn, _EN)


def thinking_text(prompt: str, turn: int = 1) -> str:
    """The reasoning summary shown before the answer (never part of the article)."""
    text = f'Okay, the user wants "{quote(prompt, 10)}". '
    if turn > 1:
        text += f"This is turn {turn} of the conversation. "
    return text + "I will plan a title, two paragraphs, key points, numbered steps and a code example."


def chat_title(prompt: str) -> str:
    """The few-word title the site generates after the first answer: never the prompt itself."""
    k = keywords(prompt, 2)
    noun = _pick(_EN["title_nouns"], _seed(prompt, 0), 5)
    title = f"{k[0].capitalize()} {k[1].capitalize()} {noun}"
    if title.lower() == clean_prompt(prompt).lower():
        title += " Chat"
    return title


def split_words(text: str) -> list[str]:
    """Chunks the answer grows by: each word with the whitespace before it (newlines kept)."""
    chunks = re.findall(r"\s*\S+", text)
    tail = text[len("".join(chunks)) :]
    if tail:
        chunks.append(tail)
    return chunks


def answer_for(prompt: str, turn: int = 1) -> str:
    """The router's article for `prompt`: the chat's normal answer (router scenarios are separate)."""
    return _article(prompt, turn, _EN)
