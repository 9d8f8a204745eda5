"""The kernel card: CARD.md rendered as a Jinja template in the sandbox, with the fields read
from build.toml and the package (never imported); every refusal names CARD.md and the line."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tinykernel import write_tiny_kernel

from kernelwheel.errors import ProjectError
from kernelwheel.model.card import (
    FIELDS,
    MAX_CARD_CHARS,
    CardFields,
    card_fields,
    default_template,
    project_card,
    render_card,
    strip_front_matter,
)
from kernelwheel.model.project import load_project

# The constructs kernel-builder's card templates use (front matter, guarded license, the first
# function in a usage snippet, loops over functions and layers, the benchmark pointer).
TEMPLATE = """\
---
library_name: kernels
{% if license %}license: {{ license }}
{% endif %}---

Card of {{ repo_id }}.

```python
k = get_kernel("{{ repo_id }}", version={{ version }})
{{ functions[0] }} = k.{{ functions[0] }}
```
{% for func in functions %}
- `{{ func }}`
{% endfor %}
{% if layers %}
Layers:
{% for layer in layers %}
- `{{ layer }}`
{% endfor %}
{% endif %}
{% if has_benchmark %}
Benchmark: `kernels benchmark {{ repo_id }} --version {{ version }}`
{% else %}
No benchmark.
{% endif %}
{% if upstream %}
Upstream: {{ upstream }}
{% endif %}
{% if source %}
Source: {{ source }}
{% endif %}
"""

INIT = '''\
"""Two functions and a layers module, exported; nothing here may run."""
raise SystemExit("imported: the card must read this file, not run it")

from . import layers

__all__ = [
    "add_one",
    "layers",
    "add_two",
]
'''

LAYERS = """\
import torch


class AddOne(torch.nn.Module):
    pass


class AddTwo(torch.nn.Module):
    pass


def helper():
    pass
"""


def _project(tmp_path: Path, card: str | None = TEMPLATE, *, hub: bool = True) -> Path:
    extra = '[general.hub]\nrepo-id = "team/tiny-add"\n' if hub else ""
    root = write_tiny_kernel(tmp_path / "k", extra_general=extra, card=False, readme=False)
    package = root / "torch-ext" / "tiny_add"
    (package / "__init__.py").write_text(INIT)
    (package / "layers.py").write_text(LAYERS)
    if card is not None:
        (root / "CARD.md").write_text(card)
    return root


def test_the_fields_come_from_build_toml_and_the_package_read_not_imported(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "benchmark.py").write_text("# a benchmark\n")
    fields = card_fields(load_project(root))
    assert fields == CardFields(
        name="tiny-add",
        package="tiny_add",
        repo_id="team/tiny-add",
        version=1,
        license="apache-2.0",
        upstream="https://example.org/team/tiny-add.git",
        source="git+https://example.org/team/tiny-add-kernel.git",
        functions=("add_one", "add_two"),
        layers=("AddOne", "AddTwo"),
        ops=("add_one(Tensor x) -> Tensor",),
        has_benchmark=True,
    )
    assert card_fields(load_project(root), version=3, dirty=True).version == 3


def test_a_template_is_rendered_with_the_fields(tmp_path: Path) -> None:
    root = _project(tmp_path)
    project = load_project(root)
    card = project_card(project, card_fields(project))
    assert card == (
        "---\n"
        "library_name: kernels\n"
        "license: apache-2.0\n"
        "---\n"
        "\n"
        "Card of team/tiny-add.\n"
        "\n"
        "```python\n"
        'k = get_kernel("team/tiny-add", version=1)\n'
        "add_one = k.add_one\n"
        "```\n"
        "- `add_one`\n"
        "- `add_two`\n"
        "Layers:\n"
        "- `AddOne`\n"
        "- `AddTwo`\n"
        "No benchmark.\n"
        "Upstream: https://example.org/team/tiny-add.git\n"
        "Source: git+https://example.org/team/tiny-add-kernel.git\n"
    )
    assert "{{" not in card and "{%" not in card


def test_layers_only_when_all_exports_them_and_none_without_all(tmp_path: Path) -> None:
    root = _project(tmp_path)
    init = root / "torch-ext" / "tiny_add" / "__init__.py"
    init.write_text('__all__ = ("add_one",)\n')
    fields = card_fields(load_project(root))
    assert (fields.functions, fields.layers) == (("add_one",), ())
    init.write_text("def add_one(x): ...\n")
    assert card_fields(load_project(root)).functions == ()
    init.write_text("this is not python (\n")  # the import reports it, not the card
    assert card_fields(load_project(root)).functions == ()


@pytest.mark.parametrize(
    ("template", "line", "message"),
    [
        ("ok\n{{ ''.__class__ }}\n", 2, "refused by the sandbox: access to attribute '__class__'"),
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", 1, "refused by the sandbox"),
        ("a\nb\n{{ functions.append('x') }}", 3, "refused by the sandbox: access to attribute"),
        ("{{ '{0.__class__}'.format(1) }}", 1, "refused by the sandbox"),
        ("{{ 'x' * 1000000000 }}", 1, "refused by the sandbox: a repetition longer than"),
        ("{{ 10 ** 100000000 }}", 1, "refused by the sandbox: the power"),
        ("\n\n{% for i in range(10**7) %}{% endfor %}", 3, "cannot render: Range too big"),
        ("{% if license %}\nunclosed\n", 2, "template syntax: Unexpected end of template"),
        ("{{ functions[5] }}", 1, "cannot render: list object has no element 5"),
    ],
)
def test_escapes_and_errors_are_refused_naming_card_md_and_the_line(
    tmp_path: Path, template: str, line: int, message: str
) -> None:
    root = _project(tmp_path, template)
    project = load_project(root)
    with pytest.raises(ProjectError) as info:
        project_card(project, card_fields(project))
    text = str(info.value)
    assert text.startswith(f"{root / 'CARD.md'}: line {line}: "), text
    assert message in text and info.value.hint


def test_an_unknown_field_is_refused_with_the_fields_named(tmp_path: Path) -> None:
    root = _project(tmp_path, "ok\n\n{% if licence %}{{ licence }}{% endif %}\n")
    project = load_project(root)
    with pytest.raises(ProjectError, match=r"CARD.md: line 3: 'licence' is not a card field") as i:
        project_card(project, card_fields(project))
    assert i.value.hint is not None and "did you mean 'license'?" in i.value.hint
    assert all(f in i.value.hint for f in FIELDS)


def test_a_field_without_a_value_is_false_but_printing_it_is_an_error(tmp_path: Path) -> None:
    root = _project(
        tmp_path, "{% if repo_id %}{{ repo_id }}{% else %}no repo{% endif %}\n", hub=False
    )
    project = load_project(root)
    assert project_card(project, card_fields(project)) == "no repo"  # trim_blocks
    (root / "CARD.md").write_text("x\nCard of {{ repo_id }}.\n")
    with pytest.raises(ProjectError, match="CARD.md: line 2: repo_id has no value") as info:
        project_card(project, card_fields(project))
    assert info.value.hint is not None and "[general.hub]" in info.value.hint


def test_a_rendered_card_is_bounded(tmp_path: Path) -> None:
    loops = "{% for i in range(100000) %}{% for j in range(100) %}xx{% endfor %}{% endfor %}"
    root = _project(tmp_path, loops)
    project = load_project(root)
    with pytest.raises(ProjectError, match=f"longer than {MAX_CARD_CHARS} characters"):
        project_card(project, card_fields(project))


def test_a_readme_is_the_card_as_it_is_and_no_card_gets_a_generated_one(tmp_path: Path) -> None:
    root = _project(tmp_path, None)
    (root / "README.md").write_text("# tiny-add\n\nLiteral {{ braces }} stay.\n")
    project = load_project(root)
    readme = project_card(project, card_fields(project))
    assert readme == "# tiny-add\n\nLiteral {{ braces }} stay.\n"
    (root / "README.md").unlink()
    text = project_card(project, card_fields(project, dirty=True))
    assert text.startswith("---\nlibrary_name: kernels\nlicense: apache-2.0\n")
    assert "# tiny-add" in text and "import tiny_add" in text and "tiny_add.add_one(...)" in text
    assert 'get_kernel("team/tiny-add", version=1)' in text
    assert "- `add_one`\n- `add_two`\n" in text and "- `AddOne`\n- `AddTwo`\n" in text
    assert "- `add_one(Tensor x) -> Tensor`" in text
    assert "uncommitted changes" in text
    assert "{{" not in text and "{%" not in text


def test_the_generated_card_without_a_repo_id_has_no_hub_snippet(tmp_path: Path) -> None:
    project = load_project(_project(tmp_path, None, hub=False))
    text = project_card(project, card_fields(project))
    assert "get_kernel" not in text and "huggingface.co/" not in text
    assert "uncommitted" not in text


def test_the_default_template_renders_with_every_field_empty() -> None:
    text = render_card(default_template(), CardFields(name="bare", package="bare"), None)
    assert "# bare" in text and "import bare" in text and "license:" not in text


def test_front_matter_is_stripped_for_a_wheel() -> None:
    assert strip_front_matter("---\nlicense: mit\n---\n\n# x\n") == "# x\n"
    body = "# x\n---\nnot front matter\n---\n"
    assert strip_front_matter(body) == body
    assert strip_front_matter("---\nunclosed\n# x\n") == "---\nunclosed\n# x\n"


def test_a_card_linked_from_outside_the_project_is_refused(tmp_path: Path) -> None:
    root = _project(tmp_path, None)
    outside = tmp_path / "secret.md"
    outside.write_text("not the project's\n")
    (root / "CARD.md").symlink_to(outside)
    project = load_project(root)
    with pytest.raises(ProjectError, match="CARD.md: a symlink pointing outside the project"):
        project_card(project, card_fields(project))
