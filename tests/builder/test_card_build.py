"""`kernelwheel build` renders the kernel card: the Hub layout's README.md and the wheel's
METADATA carry CARD.md filled from the build (read back with importlib.metadata after a real pip
install), and a project without a card gets a generated one. A pure-Python project: nothing is
compiled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.kinds import NOARCH_BUILD_TOML, write_noarch_project
from support.venvs import QuickVenv
from support.wheelread import read_wheel

from kernelwheel.cli import main
from kernelwheel.plan.options import ENV_VARS

WHEEL = "scale_noarch-1.0.0-py3-none-any.whl"
BUILD_TOML = NOARCH_BUILD_TOML.replace(
    "[torch-noarch]", '[general.hub]\nrepo-id = "team/scale-noarch"\n\n[torch-noarch]'
)
# The constructs of kernel-builder's card templates, in words of this test's own.
CARD = """\
---
library_name: kernels
{% if license %}license: {{ license }}
{% endif %}---

# {{ repo_id }}

```python
scale_kernel = get_kernel("{{ repo_id }}", version={{ version }})
{{ functions[0] }} = scale_kernel.{{ functions[0] }}
```
{% for func in functions %}
- `{{ func }}`
{% endfor %}
{% if has_benchmark %}
Run `kernels benchmark {{ repo_id }} --version {{ version }}`.
{% endif %}
"""
RENDERED_BODY = """\
# team/scale-noarch

```python
scale_kernel = get_kernel("team/scale-noarch", version=1)
scale = scale_kernel.scale
```
- `scale`
Run `kernels benchmark team/scale-noarch --version 1`.
"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def _project(root: Path, card: str | None) -> Path:
    write_noarch_project(root, BUILD_TOML)
    init = root / "torch-ext" / "scale_noarch" / "__init__.py"
    init.write_text(init.read_text() + '\n__all__ = ["scale"]\n')
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "benchmark.py").write_text("# measures scale\n")
    if card is not None:
        (root / "CARD.md").write_text(card)
    return root


def _build(root: Path, tmp_path: Path) -> tuple[Path, Path]:
    out, hub = tmp_path / "out", tmp_path / "hub"
    args = ["build", str(root), "-o", str(out), "--version", "1.0.0", "--hub-layout", str(hub)]
    assert main(args) == 0
    return out / WHEEL, hub / "README.md"


def test_the_card_is_rendered_into_the_hub_readme_and_the_wheel(tmp_path: Path) -> None:
    wheel, readme = _build(_project(tmp_path / "p", CARD), tmp_path)
    assert readme.read_text() == "---\nlibrary_name: kernels\nlicense: mit\n---\n\n" + RENDERED_BODY
    meta = read_wheel(wheel).metadata
    assert meta["Description-Content-Type"] == "text/markdown"
    body = meta.get_payload()
    assert isinstance(body, str) and body.startswith(RENDERED_BODY + "\n## This wheel\n")
    assert "the build for `pure Python (py3-none-any; backends: cpu, cuda)`" in body
    assert "`import scale_noarch`; its functions: `scale`." in body


def test_a_template_error_fails_the_build_naming_card_md(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path / "p", "# ok\n\n{{ functions.__class__.__mro__ }}\n")
    out = tmp_path / "out"
    assert main(["build", str(root), "-o", str(out), "--version", "1.0.0"]) != 0
    err = capsys.readouterr().err
    assert f"{root / 'CARD.md'}: line 3: refused by the sandbox" in err
    assert "Traceback" not in err and not (out / WHEEL).exists()


def test_a_project_without_a_card_gets_a_generated_one(tmp_path: Path) -> None:
    wheel, readme = _build(_project(tmp_path / "p", None), tmp_path)
    card = readme.read_text()
    assert card.startswith("---\nlibrary_name: kernels\nlicense: mit\n")
    assert "# scale-noarch" in card and "scale_noarch.scale(...)" in card
    assert 'get_kernel("team/scale-noarch", version=1)' in card
    assert "kernels benchmark team/scale-noarch --version 1" in card
    body = read_wheel(wheel).metadata.get_payload()
    assert isinstance(body, str) and body.startswith("# scale-noarch\n")
    assert "## This wheel" in body and "{{" not in body


@pytest.mark.slow
def test_pip_installed_metadata_carries_the_rendered_card(tmp_path: Path) -> None:
    wheel, _ = _build(_project(tmp_path / "p", CARD), tmp_path)
    venv = QuickVenv(tmp_path / "venv")
    venv.pip_install("--no-deps", str(wheel))  # torch and einops are not needed to read it
    read = (
        "import importlib.metadata as m, json; "
        "print(json.dumps(m.metadata('scale-noarch').json))"
    )
    meta = json.loads(venv.run("-c", read).stdout)
    assert meta["description_content_type"] == "text/markdown"
    assert meta["description"].startswith(RENDERED_BODY + "\n## This wheel\n")
    assert "pip install --find-links DIR 'scale-noarch==1.0.0'" in meta["description"]


def test_a_compiled_project_with_a_broken_card_is_refused_before_any_build(
    tmp_path: Path,
) -> None:
    """plan_requests, where every request of a run is made: a card that does not render stops
    the run there, before an environment or a compile."""
    from support.requests import request_for
    from support.tinykernel import write_tiny_kernel

    from kernelwheel.errors import ProjectError
    from kernelwheel.model.project import load_project
    from kernelwheel.model.recipes import load_recipes
    from kernelwheel.model.variant import Variant
    from kernelwheel.plan.options import resolve_options

    root = write_tiny_kernel(tmp_path / "k")
    (root / "CARD.md").write_text("# tiny-add\n{% for op in ops %}{{ op.__class__ }}{% endfor %}")
    recipes = load_recipes()
    recipe = recipes.recipe_for(Variant.parse("torch213-cxx11-cpu-x86_64-linux"))
    options = resolve_options(None, env={}, cli={"output_dir": str(tmp_path / "o")})
    with pytest.raises(ProjectError, match=r"CARD.md: line 2: refused by the sandbox"):
        request_for(load_project(root), recipe, "1.0.0", options, recipes)
    (root / "CARD.md").write_text("# {{ name }}\n")
    assert request_for(load_project(root), recipe, "1.0.0", options, recipes)
