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

.venv/bin/ruff check src tests
.venv/bin/mypy
# GitHub Actions workflows (and action.yml's inputs, through ci.yml's `uses: ./`); actionlint also
# runs shellcheck on their scripts where shellcheck is installed. Any finding fails.
.venv/bin/actionlint
.venv/bin/python -m pytest -m "integration or not integration" "$@"
