"""Kubernetes resource quantities (`250m`, `1Gi`, `2`, `1e3`) as exact numbers, for comparing them."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

# The API server's own pattern for a quantity (the CRDs' `pattern` is the same).
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]{0,2})$")
_SUFFIXES = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}


def quantity(value: Any) -> Fraction | None:
    """The exact value of a quantity (an int or a string), or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    match = _QUANTITY.match(str(value))
    if match is None:
        return None
    number, suffix = match.groups()
    try:
        base = Fraction(number)
    except ValueError:
        return None
    if suffix[:1] in ("e", "E"):
        return base * Fraction(10) ** int(suffix[1:])
    scale = _SUFFIXES.get(suffix)
    return None if scale is None else base * scale
