"""The README walk-through: every `kernelwheel` command in the bash blocks of the README, of
the docs pages that took over its longer sections and of the author's pages it sends a new
kernel author to (init.md, dev.md, options.md) parses with the real argument parser (no stale
flag survives a change), and the cheap ones run as written from the repository root: the matrix,
the build identifiers, the --help pages, and `check` on a folder without wheels. The README stays
a short front door: at most 150 lines, every docs page it links exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from kernelwheel.cli import main, make_parser
from kernelwheel.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
# The pages the README's long sections moved to and the author's pages it links (docs/README.md
# is the index of all pages).
MOVED = tuple(
    REPO / "docs" / name
    for name in ("building.md", "pinning.md", "release.md", "init.md", "dev.md", "options.md")
)


def bash_blocks(text: str) -> list[str]:
    """The ```bash blocks, and the `$ ` lines of the ```console ones (prompt removed)."""
    console = re.findall(r"^```console\n(.*?)^```", text, flags=re.S | re.M)
    # each `$ ` line with its `\` continuations; the output lines between them left out
    prompted = ["".join(re.findall(r"^\$ ((?:.*\\\n)*.*\n)", b, flags=re.M)) for b in console]
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M) + prompted


def commands(page: Path = README) -> list[list[str]]:
    """Each `kernelwheel ...` line of ``page`` (continuations joined), as argv without the
    program name; comments, output redirections and what follows `&&` or `|` dropped."""
    out = []
    for block in bash_blocks(page.read_text(encoding="utf-8")):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words and re.match(r"[A-Z_][A-Z0-9_]*=", words[0]):  # VAR=value kernelwheel …
                words = words[1:]
            if not words or words[0] != "kernelwheel":
                continue
            for stop in (">", "&&", "|"):
                if stop in words:
                    words = words[: words.index(stop)]
            out.append(words[1:])
    return out


COMMANDS = commands()
WALKED = COMMANDS + [argv for page in MOVED for argv in commands(page)]
CHEAP = [
    argv
    for argv in WALKED
    if argv[0] == "matrix" or "--print-build-identifiers" in argv or "--help" in argv
]


def test_the_readme_has_commands_to_walk_through() -> None:
    assert len(COMMANDS) >= 15
    assert len(CHEAP) >= 5
    for name in ("build", "matrix", "check", "to-wheel", "index", "lock", "download"):
        assert any(argv[0] == name for argv in COMMANDS), name


def run(argv: list[str]) -> int:
    if "--help" not in argv:
        return main(argv)
    with pytest.raises(SystemExit) as info:
        main(argv)
    return int(info.value.code or 0)


@pytest.mark.parametrize("argv", WALKED, ids=" ".join)
def test_every_readme_command_parses(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    if "--help" in argv:
        with pytest.raises(SystemExit) as info:
            make_parser().parse_args(argv)
        assert info.value.code == 0
        return
    if "--" in argv:  # `kernelwheel test -- ARGS`: main hands the words after "--" to pytest
        argv = argv[: argv.index("--")]
    args = make_parser().parse_args(argv)  # exits (status 2) on an unknown flag or value
    assert args.func is not None


@pytest.mark.parametrize("argv", CHEAP, ids=" ".join)
def test_cheap_readme_commands_run_as_written(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    for name in ("KERNELWHEEL_BUILD", "KERNELWHEEL_SKIP", "KERNELWHEEL_ARCHS"):
        monkeypatch.delenv(name, raising=False)
    assert run(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    if "--help" in argv:
        assert out.startswith(f"usage: kernelwheel {argv[0]}") and "--json" in out
    if argv[0] == "matrix" and "--json" not in argv:
        assert out.startswith("img2gray: ") and "torch===" in out
    if "--print-build-identifiers" in argv:
        names = out.split()
        assert names and all(n.startswith("torch") for n in names)
        if argv == ["build", "kernels/img2gray", "--print-build-identifiers"]:
            assert len(names) == 1  # the README's "ONE variant"
        if argv[2:4] == ["--build", "*"]:
            assert len(names) > 10  # the whole matrix


def test_readme_check_on_a_folder_without_wheels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (argv,) = [a for a in COMMANDS if a[0] == "check"]
    (tmp_path / "wheelhouse").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(argv) == UsageError.exit_code  # the shell passed wheelhouse/*.whl unexpanded
    assert "no file matched 'wheelhouse/*.whl'" in capsys.readouterr().err


def test_readme_names_the_wheel_a_build_really_makes() -> None:
    """The intro's wheel is the repaired one (tests/builder/test_build_img2gray.py checks a real
    build makes exactly this name)."""
    text = README.read_text(encoding="utf-8")
    intro = text[: text.index("## ")]
    assert "img2gray-0.1.0+torch2.14.cu130.cxx11-cp310-abi3-manylinux_2_28_x86_64.whl" in intro
    assert "still to come" not in text


def test_the_readme_is_a_short_front_door_linking_pages_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert "docs/README.md" in links
    for link in links:
        assert (REPO / link).exists(), link


def test_the_docs_index_lists_every_page() -> None:
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    for page in sorted((REPO / "docs").glob("*.md")):
        if page.name != "README.md":
            assert f"]({page.name})" in index, page.name
