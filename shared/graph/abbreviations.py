"""Abbreviations spelled out in the Reactome texts themselves ("tumor necrosis factor (TNF)").

Used to add the long forms to the embedded title of a pathway whose name uses the
short one ("TNF signaling" -> "TNF signaling (tumor necrosis factor)"), so plain-words
questions meet names written in abbreviations. Only pairs seen at least twice count.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable

_PAREN = re.compile(r"[ -]\(([A-Za-z][A-Za-z0-9-]{1,9})\)")
_PLAIN = re.compile(r"[A-Za-z0-9'-]+")
_WORD = re.compile(r"[A-Za-z0-9-]+")


def _words_before(text: str, end: int, most: int = 8) -> list[str]:
    """Up to `most` plain words (letters, digits, ' and -) right before position `end`."""
    words: list[str] = []
    for word in reversed(text[max(0, end - 160) : end].split()):
        if len(words) == most or not _PLAIN.fullmatch(word):
            break
        words.append(word)
    return words[::-1]


def _long_form(words: list[str], abbreviation: str) -> str | None:
    """The shortest tail of `words` starting with the abbreviation's first letter and holding its letters in order."""
    letters = [c.lower() for c in abbreviation if c.isalpha()]
    if len(letters) < 2:
        return None
    for n in range(1, min(len(words), len(letters) + 2) + 1):
        tail = words[-n:]
        if tail[0][0].lower() != letters[0]:
            continue
        text, position = " ".join(tail).lower(), 0
        for c in letters:
            position = text.find(c, position) + 1
            if position == 0:
                break
        else:
            if n >= max(1, len(letters) // 3):
                return " ".join(tail)
    return None


def mine(texts: Iterable[str], min_count: int = 2) -> dict[str, str]:
    """Abbreviation (with a capital letter) -> its most frequent lower-cased long form."""
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for text in texts:
        for match in _PAREN.finditer(text):
            abbreviation = match.group(1)
            if abbreviation.lower() == abbreviation:
                continue
            long = _long_form(_words_before(text, match.start() + 1), abbreviation)
            if long and long.lower() != abbreviation.lower():
                votes[abbreviation][long.lower()] += 1
    result = {}
    for abbreviation, counts in votes.items():
        long, count = counts.most_common(1)[0]
        if count >= min_count:
            result[abbreviation] = long
    return result


def spelled_out(name: str, abbreviations: dict[str, str]) -> str:
    """`name` plus, in brackets, the long forms of its abbreviations not already in it."""
    longs = [
        abbreviations[w]
        for w in dict.fromkeys(_WORD.findall(name))
        if w in abbreviations and abbreviations[w] not in name.lower()
    ]
    return f"{name} ({'; '.join(longs)})" if longs else name
