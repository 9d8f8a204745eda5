#!/usr/bin/env bash
# Install kernelwheel with its test tools into .venv, lint, type-check, and run the test suite
# in three tiers, each stopping the run when it fails (so a unit failure is reported in minutes,
# not after every build), each ending with its 25 slowest tests:
#   fast         -m "not integration and not slow", on every CPU (pytest-xdist, -n auto)
#   slow         -m "slow and not integration" (real pip/uv installs), on every CPU
#   integration  -m integration (compiles, builds wheels, pip-installs them), two at a time, a
#                file's tests together (their session builds are shared within a file):
#                a build leaves cores idle while pip, the link and the repair run (docs/testing.md)
# Extra arguments go to each tier's pytest (e.g. -k NAME, -x); a tier they leave empty is passed
# over, and the run fails only when they select nothing at all. TEST_TIERS picks the tiers
# (default "fast slow integration", e.g. TEST_TIERS=fast for the inner loop).
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

# Bytecode is written (into the ignored __pycache__ folders), as Python does by default: with
# PYTHONDONTWRITEBYTECODE set, every pytest process rewrote every test module's asserts again
# (collection: 7 s of CPU instead of 3) and every kernelwheel the tests start compiled its
# sources again (0.6 s of CPU instead of 0.4).
unset PYTHONDONTWRITEBYTECODE

.venv/bin/ruff check src tests
.venv/bin/mypy
# GitHub Actions workflows (and action.yml's inputs, through ci.yml's `uses: ./`); actionlint also
# runs shellcheck on their scripts where shellcheck is installed. Any finding fails.
.venv/bin/actionlint

for arg in "$@"; do
  case $arg in -m | -m?*)
    echo "scripts/test.sh: -m would replace every tier's markers; pick tiers with TEST_TIERS" >&2
    exit 2 ;;
  esac
done
ran=0
for tier in ${TEST_TIERS:-fast slow integration}; do
  case $tier in
    fast) marks="not integration and not slow" workers=auto dist=load ;;
    slow) marks="slow and not integration" workers=auto dist=load ;;
    integration) marks=integration workers=2 dist=loadfile ;;
    *) echo "TEST_TIERS: no tier '$tier' (fast, slow, integration)" >&2; exit 2 ;;
  esac
  echo "== $tier tier: -m '$marks' -n $workers --dist $dist"
  start=$SECONDS
  rc=0
  .venv/bin/python -m pytest -m "$marks" -n "$workers" --dist "$dist" --durations=25 "$@" || rc=$?
  [ "$rc" -eq 5 ] || ran=1  # 5: the arguments selected no test of this tier
  [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || { echo "== $tier tier failed (exit $rc)" >&2; exit "$rc"; }
  echo "== $tier tier: $((SECONDS - start)) s"
done
[ "$ran" -eq 1 ] || { echo "no test selected in any tier" >&2; exit 5; }
