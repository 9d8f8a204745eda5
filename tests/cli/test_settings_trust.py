"""Issue 38 family 8: settings validated where they are read. An unusable value is an error
naming the variable (or flag), the value and the accepted form, exit 2, never a silent default.
Each case runs through the real CLI (``kernelwheel.cli.main``)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from kernelwheel.cli import main
from kernelwheel.compat import rules
from kernelwheel.compat.guard import rules_source
from kernelwheel.errors import UsageError
from kernelwheel.plan.options import resolve_options

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"
DRIVER = "KERNELWHEEL_CUDA_DRIVER"
PROVIDER = "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION"


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (DRIVER, PROVIDER, "VIRTUAL_ENV", "KERNELWHEEL_CCACHE_REMOTE"):
        monkeypatch.delenv(name, raising=False)


# -- KERNELWHEEL_CUDA_DRIVER -----------------------------------------------------------------

BAD_DRIVERS = ["13,0", "abc", "13.", ".0", "13.0.1.2", "1\u0663.0", "13.0 rc"]


@pytest.mark.parametrize("value", BAD_DRIVERS)
@pytest.mark.parametrize("variable", [DRIVER, PROVIDER])
def test_an_unparsable_driver_stops_the_build_naming_the_variable(
    value: str, variable: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read as "unknown", 13,0 brought back the cu132 default a 13.0 driver cannot load."""
    monkeypatch.setenv(variable, value)
    code = main(["build", str(IMG2GRAY), "--print-build-identifiers"])
    captured = capsys.readouterr()
    assert code == UsageError.exit_code, captured.err
    assert f"{variable}={value!r} is not a CUDA version" in captured.err
    assert "MAJOR.MINOR (e.g. 13.0" in captured.err and "or none" in captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_install_refuses_an_unparsable_driver_before_probing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DRIVER, "13,0")
    code = main(["install", "--python", sys.executable, "img2gray", "-f", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == UsageError.exit_code
    assert f"{DRIVER}='13,0' is not a CUDA version" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("value", "driver"),
    [("13.0", (13, 0)), ("13", (13, 0)), (" 12.8 ", (12, 8)), ("12.8.1", (12, 8)), ("none", None)],
)
def test_the_accepted_forms(
    value: str, driver: tuple[int, int] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DRIVER, value)
    assert rules.cuda_driver() == driver
    assert rules.driver_setting() == (DRIVER, driver)


def test_the_import_guard_names_the_variable_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules run inside every wheel's guard: an unparsable value there is an error that
    names it, not a guess."""
    namespace: dict[str, object] = {"__name__": __name__}  # as the guard runs it
    exec(compile(rules_source(), "<kernelwheel.compat.rules>", "exec"), namespace)
    torch = types.SimpleNamespace(
        __version__="2.15.0+cu130",
        version=types.SimpleNamespace(cuda="13.0", hip=None, xpu=None),
        _C=types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True),
    )
    monkeypatch.setenv(DRIVER, "13,0")
    facts = namespace["torch_facts"]
    assert callable(facts)
    with pytest.raises(ValueError, match=r"KERNELWHEEL_CUDA_DRIVER='13,0' is not a CUDA version"):
        facts(torch)
    monkeypatch.setenv(DRIVER, "13.0")
    assert facts(torch).driver == (13, 0)


# -- --ccache-remote / KERNELWHEEL_CCACHE_REMOTE -----------------------------------------------

BAD_REMOTES = [
    ("redis://", "names no host"),
    ("redis://:6379", "names no host"),
    ("redis://cache.example:99999", "has port '99999'"),
    ("redis://cache.example:0", "has port '0'"),
    ("redis://cache.example:port", "has port 'port'"),
    ("http://", "names no host"),
    ("http://[::1/cache", "is no URL"),
    ("http://cache.example:70000/c|connect-timeout=500", "has port '70000'"),
    ("redis+unix:", "names no path"),
    ("file:", "names no path"),
    ("https://cache.example/c", "is no ccache remote storage URL"),
]


@pytest.mark.parametrize(("url", "problem"), BAD_REMOTES)
def test_an_unusable_remote_storage_url_is_refused_by_flag_and_variable(
    url: str, problem: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["build", str(IMG2GRAY), "--print-build-identifiers", "--ccache-remote", url])
    err = capsys.readouterr().err
    assert code == UsageError.exit_code
    assert f"--ccache-remote: {url!r} {problem}" in err and "Traceback" not in err
    monkeypatch.setenv("KERNELWHEEL_CCACHE_REMOTE", f"file:/tmp/ok {url}")
    code = main(["build", str(IMG2GRAY), "--print-build-identifiers"])
    err = capsys.readouterr().err
    assert code == UsageError.exit_code
    assert f"KERNELWHEEL_CCACHE_REMOTE: {url!r} {problem}" in err


@pytest.mark.parametrize(
    "url",
    [
        "redis://cache.example",
        "redis://cache.example:6379",
        "redis://user:secret@cache.example:6379/2|connect-timeout=500",
        "redis://[::1]:6379",
        "redis+unix:/run/redis.sock",
        "http://cache.example:8080/ccache",
        "file:/srv/ccache",
        "file:///srv/ccache|update-mtime=true",
    ],
)
def test_the_remote_storage_urls_ccache_takes_are_kept(url: str, tmp_path: Path) -> None:
    assert resolve_options(tmp_path, env={"KERNELWHEEL_CCACHE_REMOTE": url}).ccache_remote == url


# -- KERNELWHEEL_TRACEBACK -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"), [("0", False), ("false", False), ("", False), ("1", True), ("Yes", True)]
)
def test_the_traceback_variable_is_a_boolean(
    value: str,
    shown: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Any text used to turn tracebacks on: KERNELWHEEL_TRACEBACK=0 showed them."""
    monkeypatch.setenv("KERNELWHEEL_TRACEBACK", value)
    assert main(["build", str(tmp_path / "nope")]) == 3
    assert ("Traceback" in capsys.readouterr().err) is shown


def test_a_traceback_value_that_is_no_boolean_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KERNELWHEEL_TRACEBACK", "maybe")
    with pytest.raises(SystemExit) as info:
        main(["build", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert info.value.code == UsageError.exit_code
    assert "KERNELWHEEL_TRACEBACK='maybe' is neither true nor false" in err
