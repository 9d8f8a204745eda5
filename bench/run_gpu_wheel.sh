#!/usr/bin/env bash
# Run a wheel built on the CPU machine (by scripts/matrix_run.py) on the GPU machine: pip-install
# it into a fresh venv over the machine's own torch and run the kernel's own tests, GPU ones
# included. The wheel travels in .gpuwheel/ (git-ignored; `carry` it with the device call).
#   bash bench/run_gpu_wheel.sh            # writes $OUT/gpu_wheel_*.log
set -euo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
wheel=$(ls .gpuwheel/img2gray-*.whl)
# python3 there is itself a venv holding torch: layer a fresh venv on its site-packages.
site=$(python3 -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
python3 -m venv /tmp/kw-gpu-venv
echo "$site" > "$(/tmp/kw-gpu-venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_torch.pth"
/tmp/kw-gpu-venv/bin/python -m pip install -q --no-deps --no-index "$wheel"
{
  echo "wheel: $(basename "$wheel") sha256 $(sha256sum "$wheel" | cut -d' ' -f1)"
  /tmp/kw-gpu-venv/bin/python -c "import sys, torch, img2gray; print('python', sys.version.split()[0], '| torch', torch.__version__, '|', torch.cuda.get_device_name(), '| devices', img2gray.supported_devices())"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
} 2>&1 | tee "$OUT/gpu_wheel_env.log"
rm -rf /tmp/kw-kernel-tests && mkdir /tmp/kw-kernel-tests
cp -r kernels/img2gray/tests /tmp/kw-kernel-tests/smoke
cp -r tests/kernel_suites/img2gray /tmp/kw-kernel-tests/suite
cd /tmp && /tmp/kw-gpu-venv/bin/python -m pytest -q -p no:cacheprovider -rs /tmp/kw-kernel-tests/smoke /tmp/kw-kernel-tests/suite 2>&1 | tee "$OUT/gpu_wheel_pytest.log"
