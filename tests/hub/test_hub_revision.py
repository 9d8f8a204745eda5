"""VERSION parsing and resolution against refs (pure logic, no repo)."""

from __future__ import annotations

import pytest

from kernelwheel.errors import HubError, UsageError
from kernelwheel.hub.revision import (
    Ref,
    RefKind,
    RequestKind,
    VersionRequest,
    choose_ref,
    revision_resolution,
)

C = {n: f"{n:0>40}"[-40:] for n in "abcdefgh"}
REFS = [
    Ref("v1.1.0", RefKind.TAG, C["a"]),
    Ref("v1.1.2", RefKind.TAG, C["b"]),
    Ref("v1.10.0", RefKind.TAG, C["c"]),
    Ref("v2.0.0", RefKind.TAG, C["d"]),
    Ref("v2.1.0rc1", RefKind.TAG, C["e"]),
    Ref("nightly", RefKind.TAG, C["f"]),
    Ref("main", RefKind.BRANCH, C["g"]),
    Ref("v1", RefKind.BRANCH, C["h"]),
]


@pytest.mark.parametrize(
    ("text", "kind", "ref"),
    [
        ("1.1.2", RequestKind.EXACT, "v1.1.2"),
        ("v1.1.2", RequestKind.EXACT, "v1.1.2"),
        ("1.1", RequestKind.EXACT, "v1.1"),
        ("1", RequestKind.MAJOR, "v1"),
        ("v2", RequestKind.MAJOR, "v2"),
        (">=1.1.2,<2", RequestKind.RANGE, None),
        ("~=1.1", RequestKind.RANGE, None),
        ("==1.1.2", RequestKind.RANGE, None),
    ],
)
def test_parse(text: str, kind: RequestKind, ref: str | None) -> None:
    request = VersionRequest.parse(text)
    assert (request.kind, request.ref) == (kind, ref)


@pytest.mark.parametrize("text", ["", "latest", ">=1.1,,<", "1.1.2+cu128"])
def test_parse_rejects_with_examples(text: str) -> None:
    with pytest.raises(UsageError) as info:
        VersionRequest.parse(text)
    assert "1.1.2" in str(info.value)


def test_revision_takes_any_ref_and_keeps_version_for_the_wheel() -> None:
    request = VersionRequest.parse("1.1.3", revision="deadbeef")
    assert (request.kind, request.ref) == (RequestKind.REVISION, "deadbeef")
    resolved = revision_resolution(request, RefKind.COMMIT, C["a"])
    assert resolved.version == "1.1.3" and resolved.commit == C["a"]
    assert resolved.describe() == f"1.1.3 -> deadbeef (commit {C['a']})"
    with pytest.raises(UsageError, match="not a PEP 440 version"):
        VersionRequest.parse(">=1", revision="main")
    with pytest.raises(UsageError, match="local part"):
        VersionRequest.parse("1.0+x", revision="main")


def test_exact_picks_the_tag() -> None:
    r = choose_ref(VersionRequest.parse("1.1.2"), REFS, where="repo")
    assert (r.ref, r.kind, r.commit, r.version) == ("v1.1.2", RefKind.TAG, C["b"], "1.1.2")
    assert r.describe() == f"1.1.2 -> tag v1.1.2 (commit {C['b']})"


def test_exact_missing_lists_version_tags() -> None:
    with pytest.raises(HubError) as info:
        choose_ref(VersionRequest.parse("1.1.3"), REFS, where="Hub repo x/y")
    message = str(info.value)
    assert "Hub repo x/y has no tag v1.1.3" in message and "v1.1.2" in message
    assert "nightly" not in message  # not a version tag


def test_exact_does_not_take_a_branch_but_says_so() -> None:
    with pytest.raises(HubError, match="pass --revision v1"):
        choose_ref(VersionRequest.parse("v1.0"), [Ref("v1.0", RefKind.BRANCH, C["a"])], where="r")


def test_major_picks_the_branch() -> None:
    r = choose_ref(VersionRequest.parse("1"), REFS, where="repo")
    assert (r.ref, r.kind, r.commit, r.version) == ("v1", RefKind.BRANCH, C["h"], "1")
    with pytest.raises(HubError, match="no branch v3"):
        choose_ref(VersionRequest.parse("3"), REFS, where="repo")


def test_range_picks_highest_matching_numerically() -> None:
    r = choose_ref(VersionRequest.parse(">=1.1.2,<2"), REFS, where="repo")
    assert (r.ref, r.version) == ("v1.10.0", "1.10.0")  # 1.10 > 1.2, not a string compare
    r = choose_ref(VersionRequest.parse(">=1"), REFS, where="repo")
    assert r.ref == "v2.0.0"  # prereleases only when asked for
    r = choose_ref(VersionRequest.parse(">=2.1.0rc1"), REFS, where="repo")
    assert r.ref == "v2.1.0rc1"
    with pytest.raises(HubError, match="no vX.Y.Z tag of repo satisfies"):
        choose_ref(VersionRequest.parse(">=3"), REFS, where="repo")


def test_cached_refs_serve_both_kinds() -> None:
    cached = [Ref("v1.1.2", RefKind.CACHED, C["a"]), Ref("v1", RefKind.CACHED, C["b"])]
    assert choose_ref(VersionRequest.parse("1.1.2"), cached, where="r").commit == C["a"]
    assert choose_ref(VersionRequest.parse("1"), cached, where="r").commit == C["b"]
    assert choose_ref(VersionRequest.parse("<2"), cached, where="r").commit == C["a"]
    # the branch v1 is no tag of version 1: a range never resolves to it (it did offline)
    with pytest.raises(HubError, match="no vX.Y.Z tag") as info:
        choose_ref(VersionRequest.parse(">=1,<1.1"), cached, where="r")
    assert info.value.hint and "version tags there: v1.1.2;" in info.value.hint
