"""The order of a paired benchmark's cases in each repeat: as given, then reversed, in turn.

A shared machine's speed drifts by tens of percent between minutes, and a case run second can find warm caches the
first one paid for; alternating A B, B A lets both fall on every case alike, so that per-repeat ratios compare like
with like.
"""

from collections.abc import Iterable
from typing import TypeVar

Case = TypeVar("Case")


def in_turn(cases: Iterable[Case], repeat: int) -> list[Case]:
    """`cases` in their order on even repeats (counted from 0), reversed on odd ones."""
    ordered = list(cases)
    return ordered if repeat % 2 == 0 else ordered[::-1]
