import pytest

from trainrig.testing.shares import members_of_share, parse_share

IDS = [f"tests/a.py::test_faults[case{i}]" for i in range(9)] + [f"tests/b.py::test_{name}" for name in "pqrstuvw"]


def test_every_test_is_in_exactly_one_share():
    shares = [members_of_share(IDS, index, 4) for index in range(4)]
    assert sorted(test_id for share in shares for test_id in share) == sorted(IDS)


def test_a_family_of_parameters_is_spread_over_the_shares():
    family = [test_id for test_id in IDS if "test_faults" in test_id]
    assert sorted(len(members_of_share(family, index, 4)) for index in range(4)) == [2, 2, 2, 3]


def test_adding_a_test_moves_no_test_of_another_function():
    before = members_of_share(IDS, 1, 4)
    after = members_of_share([*IDS, "tests/c.py::test_new[x]", "tests/c.py::test_new[y]"], 1, 4)
    assert {test_id for test_id in after if "test_new" not in test_id} == before


@pytest.mark.parametrize("text", ["4/4", "1", "a/4", "-1/4", "1/0"])
def test_a_share_outside_its_count_is_refused(text):
    with pytest.raises(ValueError, match="expected K/N with 0 <= K < N"):
        parse_share(text)
