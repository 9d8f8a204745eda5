"""``KERNELWHEEL_*`` variables no option and no other known use reads: a misspelt name was
ignored without a word. Now each is warned of, with the closest known name; the known names are
the options' (data/options.toml) and data/variables.toml's, which a test keeps in step with
every ``KERNELWHEEL_`` name the repository spells."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.tinykernel import write_tiny_kernel

from kernelwheel.cli import main
from kernelwheel.plan.options import ENV_VARS, OTHER_VARS, unknown_variables

REPO = Path(__file__).resolve().parents[2]
# Where a variable kernelwheel, its workflows, scripts or tests read would be named.
SEARCHED = ("src", "docs", ".github", "scripts", "tests", "bench", "action.yml", "README.md")
# Names spelt with the prefix that are no environment variable: C/C++ macros of the generated
# headers and sources, a Python constant, a shell heredoc's delimiter, a placeholder, an example.
NOT_VARIABLES = {
    "KERNELWHEEL_WITH_CPU",  # macros a GPU variant's cpu kernels are compiled with
    "KERNELWHEEL_WITH_CUDA",
    "KERNELWHEEL_WITH",  # "KERNELWHEEL_WITH_*" in docs and messages
    "KERNELWHEEL_HIDDEN",  # data/kernelwheel_compat.cpp
    "KERNELWHEEL_DLSYM_VERSION",
    "KERNELWHEEL_ABI_H",  # the ABI remedies' header guard
    "KERNELWHEEL_TABLE",  # locking/declared.py's constant
    "KERNELWHEEL_WHEELS",  # action.yml's heredoc delimiter
    "KERNELWHEEL_NAME",  # options.toml: "its variable KERNELWHEEL_NAME"
    "KERNELWHEEL_JOB",  # docs/options.md's example of a misspelt name
}


def _spelt() -> dict[str, str]:
    """Every KERNELWHEEL_ name the repository spells (this file's misspelt ones aside), with one
    file that spells it."""
    found: dict[str, str] = {}
    for top in SEARCHED:
        path = REPO / top
        for file in [path] if path.is_file() else sorted(path.rglob("*")):
            if (
                not file.is_file()
                or "__pycache__" in file.parts
                or file == Path(__file__).resolve()
            ):
                continue
            text = file.read_text(errors="replace")
            for name in re.findall(r"KERNELWHEEL_[A-Z0-9_]*[A-Z0-9]", text):
                found.setdefault(name, str(file.relative_to(REPO)))
    return found


def test_the_known_variables_are_those_the_repository_reads() -> None:
    spelt = _spelt()
    known = {*ENV_VARS, *OTHER_VARS}
    stray = {name: where for name, where in spelt.items() if name not in known | NOT_VARIABLES}
    assert stray == {}, "add each to src/kernelwheel/data/variables.toml (or NOT_VARIABLES)"
    assert set(OTHER_VARS) <= set(spelt), "data/variables.toml names a variable nothing reads"
    assert not set(OTHER_VARS) & set(ENV_VARS)  # an option's variable is declared there alone


def test_a_misspelt_variable_is_warned_of_with_the_closest_name() -> None:
    env = {
        "KERNELWHEEL_JOB": "4",  # KERNELWHEEL_JOBS
        "KERNELWHEEL_no_ccache": "1",  # the case, KERNELWHEEL_NO_CCACHE
        "KERNELWHEEL_TRACEBAK": "1",  # not an option's: KERNELWHEEL_TRACEBACK
        "KERNELWHEEL_QWERTY": "1",  # nothing close
        "KERNELWHEEL_SKIPS": "",  # empty: unset, as an option's empty variable
        "KERNELWHEEL_JOBS": "2",
        "KERNELWHEEL_UPLOAD_TRIES": "3",
        "KERNELWHEEL_OPTIN": "1",
        "PATH": "/bin",
    }
    found = unknown_variables(env)
    assert [line.split()[0] for line in found] == [
        "KERNELWHEEL_JOB",
        "KERNELWHEEL_QWERTY",
        "KERNELWHEEL_TRACEBAK",
        "KERNELWHEEL_no_ccache",
    ]
    assert found[0].endswith("is ignored: did you mean KERNELWHEEL_JOBS?")
    assert found[1].endswith("is ignored: docs/options.md lists the variables of the build options")
    assert found[2].endswith("did you mean KERNELWHEEL_TRACEBACK?")
    assert found[3].endswith("did you mean KERNELWHEEL_NO_CCACHE?")
    assert unknown_variables({"KERNELWHEEL_CACHE_DIR": "/c", "KERNELWHEEL_RUN_ID": "1"}) == ()


def test_a_name_of_control_codes_is_shown_escaped_and_many_names_are_cut_to_ten() -> None:
    # the name was written to the terminal as it is: its escape codes cleared the screen; an
    # environment with hundreds of them printed hundreds of lines before the command's own
    found = unknown_variables({"KERNELWHEEL_\x1b[2J": "1"})
    assert found == (
        "'KERNELWHEEL_\\x1b[2J' is no variable kernelwheel reads, and is ignored: docs/options.md "
        "lists the variables of the build options",
    )
    many = unknown_variables({f"KERNELWHEEL_ZZ{i:03}": "1" for i in range(300)})
    assert len(many) == 11 and many[0].startswith("KERNELWHEEL_ZZ000 is no variable")
    assert many[-1] == "and 290 more KERNELWHEEL_* variables kernelwheel does not read, ignored"


def test_the_cli_warns_of_it_and_runs_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_tiny_kernel(tmp_path / "p")
    monkeypatch.setenv("KERNELWHEEL_SKPI", "*-cpu-*")
    assert main(["matrix", str(root)]) == 0
    said = capsys.readouterr()
    assert said.err.splitlines()[0] == (
        "warning: KERNELWHEEL_SKPI is no variable kernelwheel reads, and is ignored: did you "
        "mean KERNELWHEEL_SKIP?"
    )
    assert "-cpu-" in said.out  # the misspelt skip did not apply
