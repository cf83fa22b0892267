"""Which share of the slow tests a CI run adds to the default set, so that each runs in some CI run.

The default run leaves out the tests marked `slow`: together they take longer than a CI run may. `--slow-share K/4`
(tests/conftest.py) adds share K of 4 to the default run; run with K from the commit (its count of commits modulo 4),
any 4 consecutive commits' runs run every slow test at least once (docs/testing.md).

A family of tests (one test function's parameters) is spread over the shares one after another from a start that
depends only on the function's name, so a share costs about as much as another, and adding or removing a test
moves no test of another function to another share.
"""

import zlib
from collections import defaultdict
from collections.abc import Iterable

__all__ = ["members_of_share", "parse_share"]


def parse_share(text: str) -> tuple[int, int]:
    """`K/N` -> (K, N) with 0 <= K < N; a ValueError naming the form otherwise (pytest prints it as a usage error)."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise ValueError(f"expected K/N with 0 <= K < N, got {text!r}")
    return int(index), int(count)


def members_of_share(test_ids: Iterable[str], index: int, count: int) -> set[str]:
    """The ids among `test_ids` (pytest node ids) in share `index` of `count`; every id is in exactly one share."""
    families = defaultdict(list)
    for test_id in test_ids:
        families[test_id.partition("[")[0]].append(test_id)
    chosen = set()
    for family, members in families.items():
        start = zlib.crc32(family.encode())
        chosen.update(member for position, member in enumerate(sorted(members)) if (start + position) % count == index)
    return chosen
