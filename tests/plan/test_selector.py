"""Tests for kernelwheel.plan.selector: globs with brace expansion, skip, only, no-match errors."""

from __future__ import annotations

import pytest

from kernelwheel.errors import UsageError
from kernelwheel.plan.selector import Selector, expand_braces, split_patterns

NAMES = (
    "torch212-cxx11-cu130-x86_64-linux",
    "torch213-cxx11-cu130-x86_64-linux",
    "torch213-cxx11-cpu-x86_64-linux",
    "torch214-cxx11-cu130-x86_64-linux",
    "torch214-cxx11-cu130-aarch64-linux",
    "torch214-cxx11-cpu-x86_64-linux",
)


@pytest.mark.parametrize(
    ("pattern", "expanded"),
    [
        ("torch214-*", ("torch214-*",)),
        ("torch2{13,14}-*", ("torch213-*", "torch214-*")),
        ("torch2{1{3,4},9}-*", ("torch213-*", "torch214-*", "torch29-*")),
        ("t{a,b}-{c,d}", ("ta-c", "ta-d", "tb-c", "tb-d")),
        ("*-cu1{28,30}-*", ("*-cu128-*", "*-cu130-*")),
        ("x{,-y}", ("x", "x-y")),
        ("{a,a}", ("a",)),
    ],
)
def test_expand_braces(pattern: str, expanded: tuple[str, ...]) -> None:
    assert expand_braces(pattern) == expanded


@pytest.mark.parametrize("pattern", ["torch2{13,14-*", "torch213}-*", "a}{b", "{a,{b}"])
def test_unbalanced_braces_are_usage_errors(pattern: str) -> None:
    with pytest.raises(UsageError, match="unbalanced braces"):
        expand_braces(pattern)
    with pytest.raises(UsageError, match="unbalanced braces"):
        Selector(build=(pattern,))


def test_split_patterns() -> None:
    assert split_patterns("  torch213-*\ttorch214-* \n") == ("torch213-*", "torch214-*")


def test_build_and_skip_globs() -> None:
    selector = Selector(build=("torch2{13,14}-*",), skip=("*-aarch64-*", "*-cpu-*"))
    assert selector.select(NAMES) == (
        "torch213-cxx11-cu130-x86_64-linux",
        "torch214-cxx11-cu130-x86_64-linux",
    )
    assert selector.why_not("torch212-cxx11-cu130-x86_64-linux") == (
        "not matched by build 'torch2{13,14}-*'"
    )
    assert selector.why_not("torch214-cxx11-cpu-x86_64-linux") == "skipped by skip '*-cpu-*'"
    assert selector.matches("torch213-cxx11-cu130-x86_64-linux")


def test_default_selects_everything_and_several_build_patterns_add_up() -> None:
    assert Selector().select(NAMES) == NAMES
    both = Selector(build=("torch212-*", "*-aarch64-*"))
    assert both.select(NAMES) == (NAMES[0], NAMES[4])


def test_character_classes_and_question_marks() -> None:
    assert Selector(build=("torch21[34]-*-cpu-*",)).select(NAMES) == (NAMES[2], NAMES[5])
    assert Selector(build=("torch21?-cxx11-cpu-*",)).select(NAMES) == (NAMES[2], NAMES[5])


def test_only_is_exact_and_ignores_build_and_skip() -> None:
    selector = Selector(build=("nothing*",), skip=("*",), only=NAMES[3])
    assert selector.select(NAMES) == (NAMES[3],)
    assert selector.why_not(NAMES[2]) == f"not --only {NAMES[3]}"
    with pytest.raises(UsageError) as info:
        Selector(only="torch214-cxx11-cu130").select(NAMES)
    message = str(info.value)
    assert "--only 'torch214-cxx11-cu130' is not a variant" in message
    assert NAMES[3] in message  # lists what exists


def test_only_a_left_out_variant_says_why() -> None:
    left_out = {"torch27-cxx11-cu118-x86_64-linux": "torch 2.7 < torch.minver 2.9 (build.toml)"}
    with pytest.raises(UsageError) as info:
        Selector(only="torch27-cxx11-cu118-x86_64-linux").select(NAMES, left_out=left_out)
    assert "was left out: torch 2.7 < torch.minver 2.9" in str(info.value)


def test_build_pattern_matching_nothing_is_an_error_naming_it() -> None:
    selector = Selector(build=("torch214-*", "torhc213-*"), build_label="--build")
    with pytest.raises(UsageError) as info:
        selector.select(NAMES)
    message = str(info.value)
    assert "--build pattern 'torhc213-*' matches no variant" in message
    assert "available: " + ", ".join(NAMES) in message


def test_build_pattern_matching_only_left_out_variants_gives_reasons() -> None:
    left_out = {"torch27-cxx11-cu128-x86_64-linux": "torch 2.7 < torch.minver 2.9 (build.toml)"}
    selector = Selector(build=("torch27-*",), build_label="KERNELWHEEL_BUILD")
    with pytest.raises(UsageError) as info:
        selector.select(NAMES, left_out=left_out)
    message = str(info.value)
    assert (
        "KERNELWHEEL_BUILD pattern 'torch27-*' matches only variants that were left out" in message
    )
    assert "torch27-cxx11-cu128-x86_64-linux (torch 2.7 < torch.minver 2.9" in message


def test_skip_that_removes_everything_is_an_error() -> None:
    selector = Selector(build=("torch214-*",), skip=("*-linux",), skip_label="--skip")
    with pytest.raises(UsageError, match="with --skip '\\*-linux' selects no variant"):
        selector.select(NAMES)


def test_skip_matching_nothing_is_fine() -> None:
    assert Selector(skip=("*-rocm*",)).select(NAMES) == NAMES


def test_empty_plan_is_an_error_with_reasons() -> None:
    left_out = {"a": "reason a", "b": "reason b"}
    with pytest.raises(UsageError) as info:
        Selector().select((), left_out=left_out)
    assert "plan is empty (2 left out)" in str(info.value)
    assert "1 variant(s): reason a (e.g. a); 1 variant(s): reason b (e.g. b)" in str(info.value)


def test_an_empty_plan_names_the_deciding_reason_first() -> None:
    """Issue 30: 42 variants left out, 16 by a minver: the hint names the minver (grouped,
    counted), not eight backends the project does not build and 'and 34 more'."""
    left_out = {
        f"torch2{m}-cxx11-cu128-x86_64-linux": "backend cuda not in the project's backends (cpu)"
        for m in range(7, 15)
    }
    left_out |= {
        f"torch2{m}-cxx11-cpu-x86_64-linux": f"torch 2.{m} < torch.minver 2.99 (build.toml)"
        for m in range(7, 15)
    }
    with pytest.raises(UsageError) as info:
        Selector().select((), left_out=left_out)
    hint = info.value.hint or ""
    assert hint.startswith("left out: 8 variant(s): torch 2.7 < torch.minver 2.99"), hint
    assert "8 variant(s): backend cuda" in hint and "more" not in hint


@pytest.mark.parametrize(
    "kwargs",
    [
        {"build": ()},
        {"build": ("",)},
        {"skip": (" x",)},
        {"build": "torch214-*"},
        {"only": " "},
    ],
)
def test_malformed_selectors(kwargs: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        Selector(**kwargs)  # type: ignore[arg-type]


def test_ranges_expand() -> None:
    """bracex (what cibuildwheel uses) also gives numeric ranges."""
    assert expand_braces("torch21{2..4}-*") == ("torch212-*", "torch213-*", "torch214-*")


@pytest.mark.parametrize("pattern", ["{a,b}" * 14, "torch2{1,2,3,4,5,6,7,8,9,0}" * 4 + "-*"])
def test_brace_expansion_is_bounded(pattern: str) -> None:
    """Exponential expansion is refused at once with a usage error, not computed for minutes."""
    import time

    start = time.monotonic()
    with pytest.raises(UsageError, match="expands to more than 1000 patterns"):
        Selector(build=(pattern,))
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize(
    ("label", "several"),
    [
        ("--variant", "--variant torch213-cxx11-cpu-x86_64-linux --variant torch214-cxx11-cu130"),
        ("--build", "--build 'torch213-cxx11-cpu-x86_64-linux torch214-cxx11-cu130"),
    ],
)
def test_a_comma_separated_list_is_told_how_to_give_several_patterns(
    label: str, several: str
) -> None:
    pattern = "torch213-cxx11-cpu-x86_64-linux,torch214-cxx11-cu130-x86_64-linux"
    with pytest.raises(UsageError) as info:
        Selector(build=(pattern,), build_label=label).select(NAMES)
    assert f"{label} pattern {pattern!r} matches no variant" in str(info.value)
    assert several in info.value.hint
    assert "'{A,B}'" in info.value.hint


@pytest.mark.parametrize("pattern", ["torch2{13,14}-nope", "torch2{1{3,4},9}-nope", "nope"])
def test_commas_inside_braces_get_no_list_hint(pattern: str) -> None:
    with pytest.raises(UsageError) as info:
        Selector(build=(pattern,), build_label="--variant").select(NAMES)
    assert "outside braces" not in info.value.hint
