"""Word normalisation shared by construction and evaluation: one way to split text into words and
one plural rule, so that a tuple canonicalised, a QA pair verified and a response scored all agree
on which words are the same ("boxes" is "box" everywhere).

Module-specific tables stay with their module and are applied around these functions: the strict
scorer's SYNONYMS, the verifier's number words.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9]+")


def split_words(text: str | None) -> list[str]:
    """Lower-case runs of letters and digits, in order: "Gold-plated 2 Boxes!" -> gold, plated, 2,
    boxes. Anything else (hyphens, apostrophes, accented letters) separates words."""
    return _WORD.findall((text or "").lower())


def singular(word: str) -> str:
    """A plural noun's singular, by spelling: galaxies -> galaxy, benches -> bench, dishes -> dish,
    boxes -> box, glasses -> glass, cups -> cup. `word` is one lower-case word (from split_words).

    Kept as written: -ss, -us and -is (glass, cactus, tennis) and words of three letters or fewer.
    Not folded: -ses and -zes (the strict scorer used to drop their "es", for buses -> bus), because
    far more such plurals come from a singular in -se/-ze (horses, houses, vases, sizes) than from
    one in -s/-z (buses, gases, lenses); those keep their "e" (horses -> horse, buses -> buse).
    A rule by spelling, not a dictionary: irregular plurals (people, knives) are not folded, a
    singular in -ie/-che/-xe loses its "e" in the plural (movies -> movy, niches -> nich, axes ->
    ax) and a plural of a noun in -u/-i is kept (menus, kiwis).
    """
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")) else word
