# Sourced by the GPU drivers (bench/gpu_real_kernels.sh, bench/gpu_build_corpus.sh): a venv at
# $V over the image's torch, with the packages named in $GPU_PACKAGES installed from the carried
# .gpu/wheels (the machine has no network); pip's later downloads (CUTLASS headers) go there too.
PY=$(command -v python3)
V=/tmp/kwv
"$PY" -m venv --system-site-packages "$V"
# The image's python3 is itself a venv: --system-site-packages reaches only its base interpreter.
"$PY" -c 'import site; print("\n".join(site.getsitepackages()))' \
  > "$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_parent.pth"
# shellcheck disable=SC2086  # a list of package names
"$V/bin/pip" install -q --no-index --find-links .gpu/wheels $GPU_PACKAGES 2>&1 | tail -3
export PIP_NO_INDEX=1 PIP_FIND_LINKS="$PWD/.gpu/wheels" PYTHONUNBUFFERED=1
