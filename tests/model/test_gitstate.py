"""GitState: one type, one parser and one formatter for a repository's state."""

from __future__ import annotations

import pytest

from kernelwheel.model.gitstate import GitState

SHA1, SHA256 = "0123456789abcdef" * 2 + "01234567", "fedcba98" * 8


def test_a_provenance_record_round_trips() -> None:
    for commit in (SHA1, SHA256):
        state = GitState(commit, True)
        assert GitState.parse(state.to_dict()) == state
    assert GitState(SHA1, False, ("v1.0.0",)).to_dict() == {"commit": SHA1, "dirty": False}


def test_the_older_spelling_and_upper_case_are_read() -> None:
    assert GitState.parse({"sha": SHA1.upper(), "dirty": False}) == GitState(SHA1, False)


@pytest.mark.parametrize(
    "record",
    [
        {"commit": SHA1[:12], "dirty": False},  # abbreviated
        {"commit": SHA1, "dirty": "no"},
        {"dirty": True},
        {"commit": "g" * 40, "dirty": False},
    ],
)
def test_a_bad_record_is_refused_saying_what_goes_together(record: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="a full commit id .* and a boolean go together"):
        GitState.parse(record)


def test_a_state_holds_only_a_full_lowercase_commit() -> None:
    with pytest.raises(ValueError, match="not a full lowercase commit id"):
        GitState(SHA1.upper(), False)
