"""Word lists the generator draws names, titles and phrasing from (written for this project)."""

from __future__ import annotations

import random

FIRST_NAMES = (
    "Ada", "Bruno", "Chen", "Dalia", "Emeka", "Freya", "Gustavo", "Hana", "Ivan", "Jamila", "Kofi",
    "Lena", "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Samir", "Tomas", "Uma", "Viktor",
    "Wen", "Ximena", "Yusuf", "Zoe",
)  # fmt: skip
LAST_NAMES = (
    "Abbott", "Banerjee", "Castro", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito",
    "Jensen", "Kowalski", "Lopez", "Mensah", "Novak", "Okafor", "Petrov", "Quist", "Rossi", "Sato",
    "Tanaka", "Ueda", "Varga", "Walsh", "Xu", "Yilmaz", "Zimmer",
)  # fmt: skip
PLACE_WORDS = (
    "North", "South", "East", "West", "Central", "Harbour", "Riverside", "Hilltop", "Old Town",
    "Airport", "Lakeside", "Market", "Station", "Park", "Bridge", "Mill",
)  # fmt: skip
NAME_WORDS = (
    "Aurora", "Birch", "Cedar", "Delta", "Ember", "Falcon", "Granite", "Harbor", "Iris", "Juniper",
    "Kestrel", "Lumen", "Maple", "Nova", "Onyx", "Pine", "Quartz", "Raven", "Sierra", "Tundra",
)  # fmt: skip

OPENERS = (
    "", "", "Hi.", "Hello!", "Hey there!", "Good morning.", "Quick one:", "Hi, I need a hand.",
    "I need some help with the {theme}.", "This is {person} from the {theme}.", "Urgent request:",
    "On behalf of the {theme} team:", "Hope you're well.",
)  # fmt: skip
CLOSERS = (
    "", "", "", "Thanks!", "Thank you.", "Let me know once it is done.", "Appreciate it.",
    "Cheers.", "That's all for now.", "Thanks in advance.",
)  # fmt: skip
REQUESTS = ("Please {}.", "Could you {}?", "I'd like you to {}.", "Can you {}?", "{}.", "I need you to {}.")
CONNECTORS = ("then", "after that", "also", "next", "and then", "once that's done")
FOLLOW_UPS = ("Great, now", "Thanks. Next,", "Perfect. One more thing:", "Okay, and", "Also,", "Good. Now")


def person_names() -> list[str]:
    return [f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES]


def combos(left: tuple[str, ...], right: tuple[str, ...], sep: str = " ") -> list[str]:
    return [f"{a}{sep}{b}" for a in left for b in right]


def draw_distinct(rng: random.Random, pool: list[str], n: int) -> list[str]:
    """``n`` distinct values from ``pool`` (repeats get a numeric suffix once the pool runs out)."""
    if n <= len(pool):
        return rng.sample(pool, n)
    return [pool[i % len(pool)] + ("" if i < len(pool) else f" {i // len(pool) + 1}") for i in range(n)]


def fresh(rng: random.Random, pool: list[str], taken: set[str]) -> str:
    """A value of ``pool`` not in ``taken`` (a numbered variant if every one is taken)."""
    for _ in range(20):
        value = rng.choice(pool)
        if value not in taken:
            return value
    base, n = rng.choice(pool), 2
    while f"{base} {n}" in taken:
        n += 1
    return f"{base} {n}"
