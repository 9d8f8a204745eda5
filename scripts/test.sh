#!/usr/bin/env bash
# Install kernelwheel with its test tools into .venv, lint, type-check, and run the test suite
# (unit tests and the integration tests that really compile, build wheels and pip-install them).
# Extra arguments go to pytest (e.g. -m "not integration" for the fast unit tests only). Plain
# `pytest` skips the integration tests (pyproject.toml's addopts); this script runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --disable-pip-version-check -q -e '.[dev]'

# The tests keep a cache of their own (work folders, reuse records, compiler cache, interpreter
# probes, logs), so a test run never evicts the user's warm builds (issue 30: after the suite,
# an unchanged kernel recompiled). The build environments, the CUDA toolkit store and the tools
# kernelwheel installs are shared with the user's cache: each is immutable once marked ready and
# made under a lock, so sharing them is safe, and a local run does not make them again. (On a
# fresh CI machine both caches start empty: the run makes them once either way.)
USER_CACHE=${KERNELWHEEL_CACHE_DIR:-$HOME/.cache/kernelwheel}
export KERNELWHEEL_CACHE_DIR=${KERNELWHEEL_TEST_CACHE_DIR:-$HOME/.cache/kernelwheel-tests}
mkdir -p "$KERNELWHEEL_CACHE_DIR"
for shared in envs toolkits tools; do
  mkdir -p "$USER_CACHE/$shared"
  [ -e "$KERNELWHEEL_CACHE_DIR/$shared" ] || ln -s "$USER_CACHE/$shared" "$KERNELWHEEL_CACHE_DIR/$shared"
done

.venv/bin/ruff check src tests
.venv/bin/mypy
# GitHub Actions workflows (and action.yml's inputs, through ci.yml's `uses: ./`); actionlint also
# runs shellcheck on their scripts where shellcheck is installed. Any finding fails.
.venv/bin/actionlint
.venv/bin/python -m pytest -m "integration or not integration" "$@"
