"""Write the options table of docs/options.md from the one table of build options,
src/kernelwheel/data/options.toml: ``python scripts/options_doc.py [--check] [PAGE]``.
The page keeps its prose; only the lines between the two markers are made. With --check it
writes nothing and exits 1 when the page is out of step (tests/plan/test_options_doc.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from kernelwheel.plan.options import OPTIONS

DOC = Path(__file__).resolve().parents[1] / "docs" / "options.md"
BEGIN = "<!-- made by scripts/options_doc.py from src/kernelwheel/data/options.toml -->"
END = "<!-- end of the made table -->"


def table() -> list[str]:
    """The markdown table: one row per option, in the table's order."""
    lines = ["| TOML key | environment | flag | default | meaning |", "| --- " * 5 + "|"]
    for o in OPTIONS:
        value = f" {o.metavar}" if o.metavar else ""
        flag = f"{o.flag}{value}" + (f", {o.short}{value}" if o.short else "")  # as --help
        cells = (f"`{o.toml}`" if o.toml else "—", f"`{o.env}`" if o.env else "—", f"`{flag}`")
        row = (*cells, o.default, o.help)
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return lines


def render(page: str) -> str:
    """``page`` with the lines between its markers replaced by :func:`table`."""
    lines = page.splitlines()
    if BEGIN not in lines or END not in lines:
        raise SystemExit(f"docs/options.md: the markers are missing:\n{BEGIN}\n{END}")
    start, end = lines.index(BEGIN), lines.index(END)
    return "\n".join([*lines[: start + 1], *table(), *lines[end:]]) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [Path(a) for a in argv if a != "--check"]
    page = paths[0] if paths else DOC
    old = page.read_text(encoding="utf-8")
    new = render(old)
    if check:
        if new != old:
            print(f"{page} is out of step with options.toml: run python scripts/options_doc.py")
        return int(new != old)
    page.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
