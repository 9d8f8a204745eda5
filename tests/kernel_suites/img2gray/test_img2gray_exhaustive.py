"""kernelwheel's exhaustive tests of the installed img2gray package (never of the source tree,
never of kernelwheel); kernels/img2gray/tests holds the kernel's own short smoke test.

Run inside an environment where an img2gray wheel is installed (the integration tests copy this
folder beside the wheel's venv):
    python -m pytest tests/kernel_suites/img2gray   # CPU tests need a CPU build, GPU tests a GPU
Each build serves one backend (kernel-builder's rule): CPU tests run against a CPU build, GPU
tests (marked ``gpu``) need a CUDA device and a CUDA build; the rest run on meta tensors.
"""

from __future__ import annotations

import img2gray
import numpy as np
import pytest
import torch

SHAPES = [
    (1, 1, 3),
    (2, 3, 3),
    (17, 31, 3),
    (255, 257, 3),
    (480, 641, 3),
    (4, 33, 17, 3),
    (3, 1, 1, 3),
    (2, 64, 64, 3),
]
EMPTY_SHAPES = [(0, 5, 3), (5, 0, 3), (0, 4, 4, 3), (2, 0, 3, 3), (0, 0, 0, 3)]

HAS_CUDA = torch.cuda.is_available()
BUILD_HAS_CUDA = "cuda" in img2gray.supported_devices()
BUILD_HAS_CPU = "cpu" in img2gray.supported_devices()
# The argument checks are shared by every backend's kernel and the Meta kernel: run them on the
# CPU kernel where the build has it, else on the Meta kernel.
CHECK_DEVICE = "cpu" if BUILD_HAS_CPU else "meta"
gpu = pytest.mark.gpu
needs_cpu = pytest.mark.skipif(not BUILD_HAS_CPU, reason="this img2gray build has no CPU kernel")
needs_gpu = pytest.mark.skipif(
    not (HAS_CUDA and BUILD_HAS_CUDA),
    reason="needs a CUDA device and a CUDA build of img2gray"
    if not HAS_CUDA
    else "this img2gray build has no CUDA kernel",
)


# ---------------------------------------------------------------- references (NumPy only)
def reference(rgb: np.ndarray) -> np.ndarray:
    """(21 R + 72 G + 7 B) // 100, vectorised in int64 NumPy."""
    x = rgb.astype(np.int64)
    return ((21 * x[..., 0] + 72 * x[..., 1] + 7 * x[..., 2]) // 100).astype(np.uint8)


def reference_float64(rgb: np.ndarray) -> np.ndarray:
    """floor(0.21 R + 0.72 G + 0.07 B) in float64. The exact value is a multiple of 1/100 and the
    float64 error is below 1e-12, so a nudge of 1e-9 makes the floor exact."""
    x = rgb.astype(np.float64)
    return np.floor(0.21 * x[..., 0] + 0.72 * x[..., 1] + 0.07 * x[..., 2] + 1e-9).astype(np.uint8)


def all_colours() -> np.ndarray:
    """A 4096 x 4096 image holding each of the 2^24 RGB colours once."""
    v = np.arange(1 << 24, dtype=np.uint32)
    rgb = np.stack([(v >> 16) & 0xFF, (v >> 8) & 0xFF, v & 0xFF], axis=-1).astype(np.uint8)
    return rgb.reshape(4096, 4096, 3)


def random_image(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


def assert_equal(got: torch.Tensor, want: np.ndarray, what: str) -> None:
    got_np = got.cpu().numpy()
    assert got_np.shape == want.shape, f"{what}: shape {got_np.shape} != {want.shape}"
    bad = np.flatnonzero(got_np != want)
    assert bad.size == 0, (
        f"{what}: {bad.size} of {want.size} pixels differ; first at flat index {bad[0]}: "
        f"got {got_np.flat[bad[0]]}, want {want.flat[bad[0]]}"
    )


@pytest.fixture(scope="module")
def colours() -> np.ndarray:
    return all_colours()


# ---------------------------------------------------------------- the formula itself
def test_reference_is_the_truncated_real_formula(colours: np.ndarray) -> None:
    np.testing.assert_array_equal(reference(colours), reference_float64(colours))


def test_naive_float32_formula_differs_on_known_count(colours: np.ndarray) -> None:
    """Documents why the kernel uses integers: float32 0.21f*r + 0.72f*g + 0.07f*b (evaluated
    left to right, each step rounded, then truncated) is wrong on 4518 colours."""
    x = colours.astype(np.float32)
    f = np.float32
    naive = f(0.21) * x[..., 0]
    naive = naive + f(0.72) * x[..., 1]
    naive = naive + f(0.07) * x[..., 2]
    assert np.count_nonzero(naive.astype(np.uint8) != reference(colours)) == 4518


# ---------------------------------------------------------------- CPU
def test_one_backend_per_build() -> None:
    """A CUDA torch gets the CUDA build, a CPU torch the CPU build (the import guard refuses
    the others), and each build has its own backend's kernel only."""
    want = ("cuda",) if torch.version.cuda else ("cpu",)
    assert img2gray.supported_devices() == want


@pytest.mark.skipif(BUILD_HAS_CPU, reason="a CPU build")
def test_cuda_build_rejects_cpu_tensors() -> None:
    with pytest.raises(NotImplementedError, match="'CPU' backend"):
        img2gray.img2gray(torch.zeros(4, 4, 3, dtype=torch.uint8))


@needs_cpu
def test_cpu_all_colours(colours: np.ndarray) -> None:
    out = img2gray.img2gray(torch.from_numpy(colours))
    assert out.dtype == torch.uint8 and out.shape == (4096, 4096)
    assert_equal(out, reference(colours), "cpu, all 2^24 colours")


@needs_cpu
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_cpu_random(rng: np.random.Generator, shape: tuple[int, ...]) -> None:
    img = random_image(rng, shape)
    assert_equal(img2gray.img2gray(torch.from_numpy(img)), reference(img), f"cpu {shape}")


@needs_cpu
@pytest.mark.parametrize("shape", EMPTY_SHAPES, ids=str)
def test_cpu_empty(shape: tuple[int, ...]) -> None:
    out = img2gray.img2gray(torch.empty(shape, dtype=torch.uint8))
    assert out.shape == shape[:-1] and out.dtype == torch.uint8


@needs_cpu
def test_cpu_poisoned_output_fully_written(rng: np.random.Generator) -> None:
    img = random_image(rng, (3, 37, 53, 3))
    for poison in (0x00, 0xFF, 0xA5):
        out = torch.full((3, 37, 53), poison, dtype=torch.uint8)
        img2gray.ops.img2gray(torch.from_numpy(img), out)
        assert_equal(out, reference(img), f"cpu, output poisoned with {poison:#x}")


def noncontiguous_views(img: torch.Tensor) -> dict[str, torch.Tensor]:
    """Non-contiguous (or oddly placed) views of a (N, H, W, 3) image."""
    chw = img[0].permute(2, 0, 1).contiguous()
    return {
        "column-strided": img[:, :, ::2],
        "row-strided": img[:, ::3],
        "cropped": img[:, 1:-1, 2:-1],
        "permuted-chw": chw.permute(1, 2, 0),
        "batch-strided": img[::2],
        "offset-batch": img[1:],  # contiguous but starts at an odd pixel offset
        "flipped-rows": img.flip(1),
    }


@needs_cpu
def test_cpu_noncontiguous(rng: np.random.Generator) -> None:
    img = torch.from_numpy(random_image(rng, (3, 21, 35, 3)))
    for name, view in noncontiguous_views(img).items():
        assert_equal(img2gray.img2gray(view), reference(view.numpy()), f"cpu, {name}")


@needs_cpu
def test_cpu_output_is_new_contiguous_tensor(rng: np.random.Generator) -> None:
    img = torch.from_numpy(random_image(rng, (9, 10, 3)))
    out = img2gray.img2gray(img)
    assert out.is_contiguous() and out.device == img.device
    assert out.data_ptr() != img.data_ptr()


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.int8, torch.int32, torch.bool, torch.float16], ids=str
)
def test_rejects_dtype(dtype: torch.dtype) -> None:
    with pytest.raises(TypeError, match=r"expected a uint8 image, got "):
        img2gray.img2gray(torch.zeros(4, 4, 3, dtype=dtype, device=CHECK_DEVICE))


@pytest.mark.parametrize(
    "shape", [(4, 4), (4, 4, 4), (3, 4, 4), (4, 4, 1), (1, 2, 4, 4, 3), (3,), ()], ids=str
)
def test_rejects_shape(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=r"expected shape \(H, W, 3\) or \(N, H, W, 3\)"):
        img2gray.img2gray(torch.zeros(shape, dtype=torch.uint8, device=CHECK_DEVICE))


def test_rejects_non_tensor() -> None:
    with pytest.raises(TypeError, match="expected a torch.Tensor, got ndarray"):
        img2gray.img2gray(np.zeros((4, 4, 3), dtype=np.uint8))  # type: ignore[arg-type]


def test_meta_input_gives_shape_only_output() -> None:
    """The functional op's Meta kernel (what torch.compile traces with) checks and shapes."""
    out = img2gray.img2gray(torch.empty(2, 4, 5, 3, dtype=torch.uint8, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 4, 5) and out.dtype == torch.uint8
    with pytest.raises(TypeError, match="expected a uint8 image"):
        img2gray.img2gray(torch.empty(4, 4, 3, dtype=torch.float32, device="meta"))
    with pytest.raises(ValueError, match=r"expected shape \(H, W, 3\)"):
        img2gray.img2gray(torch.empty(4, 4, 4, dtype=torch.uint8, device="meta"))


@needs_cpu
def test_functional_op_reuses_no_stale_memory(rng: np.random.Generator) -> None:
    """The op called directly (torch.ops namespace) allocates its output: every pixel written,
    even where the allocator hands back a block freshly filled with a poison value."""
    for shape in [(3, 37, 53, 3), (64, 64, 3), (1, 1, 3)]:
        img = random_image(rng, shape)
        for poison in (0x00, 0xFF, 0xA5):
            del_me = torch.full(shape[:-1], poison, dtype=torch.uint8)
            del del_me
            assert_equal(
                img2gray.ops.img2gray(torch.from_numpy(img)), reference(img), f"op {shape}"
            )


@pytest.mark.skipif(not HAS_CUDA or BUILD_HAS_CUDA, reason="needs a GPU and a CPU-only build")
def test_cpu_only_build_rejects_cuda() -> None:
    with pytest.raises(NotImplementedError, match="'CUDA' backend"):
        img2gray.img2gray(torch.zeros(4, 4, 3, dtype=torch.uint8, device="cuda"))


@needs_cpu
def test_op_checks_its_arguments() -> None:
    """The op itself (torch.ops namespace) validates too, for callers that bypass the wrapper."""
    img = torch.zeros(4, 5, 3, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="output shape must be"):
        img2gray.ops.img2gray(img, torch.empty(5, 4, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="output must be uint8"):
        img2gray.ops.img2gray(img, torch.empty(4, 5, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="input must be uint8"):
        img2gray.ops.img2gray(img.float(), torch.empty(4, 5, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="must be contiguous"):
        img2gray.ops.img2gray(img[:, ::2], torch.empty(4, 3, dtype=torch.uint8))
    # The functional op: Python's exception types, from C++.
    with pytest.raises(TypeError, match="expected a uint8 image"):
        img2gray.ops.img2gray(img.float())
    with pytest.raises(ValueError, match=r"expected shape \(H, W, 3\)"):
        img2gray.ops.img2gray(img[..., :2])
    with pytest.raises(ValueError, match=r"expected shape \(H, W, 3\)"):
        img2gray.ops.img2gray(img[None, None])


@needs_cpu
def test_cpu_traces_under_torch_compile(rng: np.random.Generator) -> None:
    """The fake registration lets dynamo/AOT trace the op in one graph (no C++ compiler needed
    with the aot_eager backend; the GPU test uses inductor)."""
    fn = torch.compile(img2gray.img2gray, fullgraph=True, backend="aot_eager")
    img = random_image(rng, (2, 19, 23, 3))
    assert_equal(fn(torch.from_numpy(img)), reference(img), "cpu, torch.compile(aot_eager)")


# ---------------------------------------------------------------- CUDA
@gpu
@needs_gpu
def test_cuda_all_colours(colours: np.ndarray) -> None:
    """Every colour, as the CPU build's test_cpu_all_colours: both equal the formula, so the
    two builds agree bit for bit."""
    img = torch.from_numpy(colours)
    gpu_out = torch.full((4096, 4096), 0xA5, dtype=torch.uint8, device="cuda")
    img2gray.ops.img2gray(img.cuda(), gpu_out)
    assert_equal(gpu_out, reference(colours), "cuda, all 2^24 colours")


@gpu
@needs_gpu
@pytest.mark.parametrize("shape", SHAPES + [(1080, 1920, 3), (7, 135, 241, 3)], ids=str)
def test_cuda_random_poisoned(rng: np.random.Generator, shape: tuple[int, ...]) -> None:
    img = random_image(rng, shape)
    x = torch.from_numpy(img).cuda()
    for poison in (0x00, 0xFF):
        out = torch.full(shape[:-1], poison, dtype=torch.uint8, device="cuda")
        img2gray.ops.img2gray(x, out)
        assert_equal(out, reference(img), f"cuda {shape}, output poisoned with {poison:#x}")
    assert_equal(img2gray.img2gray(x), reference(img), f"cuda {shape} via img2gray()")


@gpu
@needs_gpu
@pytest.mark.parametrize("shape", EMPTY_SHAPES, ids=str)
def test_cuda_empty(shape: tuple[int, ...]) -> None:
    out = img2gray.img2gray(torch.empty(shape, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    assert out.shape == shape[:-1] and out.device.type == "cuda"


@gpu
@needs_gpu
def test_cuda_noncontiguous(rng: np.random.Generator) -> None:
    img = torch.from_numpy(random_image(rng, (3, 21, 35, 3))).cuda()
    for name, view in noncontiguous_views(img).items():
        want = reference(view.cpu().numpy())
        assert_equal(img2gray.img2gray(view), want, f"cuda, {name}")


@gpu
@needs_gpu
def test_cuda_misaligned_pointers(rng: np.random.Generator) -> None:
    """Views starting at every byte offset 0..16 for input and output: the kernel reads and
    writes single bytes, so no alignment is assumed."""
    pixels = 16 * 37 + 5
    flat_in = torch.from_numpy(random_image(rng, (pixels + 17, 3))).cuda()
    flat_out = torch.empty(pixels + 17, dtype=torch.uint8, device="cuda")
    for off_in in range(17):
        for off_out in (0, 1, 3, 16):
            x = flat_in[off_in : off_in + pixels]
            out = flat_out[off_out : off_out + pixels].fill_(0xA5)
            img2gray.ops.img2gray(x, out)
            want = reference(x.cpu().numpy())
            assert_equal(out, want, f"cuda, input offset {off_in} px, output offset {off_out} px")


@gpu
@needs_gpu
def test_cuda_torch_compile_fullgraph(rng: np.random.Generator) -> None:
    fn = torch.compile(img2gray.img2gray, fullgraph=True)
    for shape in [(2, 45, 67, 3), (31, 17, 3)]:
        img = random_image(rng, shape)
        assert_equal(fn(torch.from_numpy(img).cuda()), reference(img), f"compiled {shape}")


@gpu
@needs_gpu
def test_cuda_graph_capture(rng: np.random.Generator) -> None:
    static_in = torch.empty((2, 71, 93, 3), dtype=torch.uint8, device="cuda")
    static_out = torch.empty((2, 71, 93), dtype=torch.uint8, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture
        img2gray.ops.img2gray(static_in, static_out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        img2gray.ops.img2gray(static_in, static_out)
    for _ in range(3):
        img = random_image(rng, (2, 71, 93, 3))
        static_in.copy_(torch.from_numpy(img))
        static_out.fill_(0xA5)
        graph.replay()
        assert_equal(static_out, reference(img), "cuda graph replay")


@gpu
@needs_gpu
def test_cuda_graph_capture_functional(rng: np.random.Generator) -> None:
    """The public call (allocation included) captured in a CUDA graph: the output lives in the
    graph's pool and every replay rewrites it from the current input."""
    static_in = torch.empty((2, 71, 93, 3), dtype=torch.uint8, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture
        img2gray.img2gray(static_in)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = img2gray.img2gray(static_in)
    for _ in range(3):
        img = random_image(rng, (2, 71, 93, 3))
        static_in.copy_(torch.from_numpy(img))
        static_out.fill_(0xA5)
        graph.replay()
        assert_equal(static_out, reference(img), "cuda graph replay of img2gray()")


@gpu
@needs_gpu
@pytest.mark.parametrize("shape", [(1080, 1920, 3), (2, 135, 241, 3), (5, 7, 3)], ids=str)
def test_cuda_functional_op_poisoned_pool(rng: np.random.Generator, shape: tuple[int, ...]) -> None:
    """The output comes from the caching allocator: a block just freed after a poison fill is
    handed back, so any pixel the kernel misses shows."""
    img = random_image(rng, shape)
    x = torch.from_numpy(img).cuda()
    for poison in (0x00, 0xFF):
        torch.full(shape[:-1], poison, dtype=torch.uint8, device="cuda")  # freed at once
        assert_equal(img2gray.ops.img2gray(x), reference(img), f"cuda op {shape}, pool {poison:#x}")


@gpu
@needs_gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_cuda_image_on_another_device(rng: np.random.Generator) -> None:
    """An image on another device than the current one gets its output there, computed there,
    on that device's current stream, and the caller's current device is left as it was."""
    img = random_image(rng, (2, 135, 241, 3))
    want = reference(img)
    for current, other in ((0, 1), (1, 0)):
        with torch.cuda.device(current):
            x = torch.from_numpy(img).to(f"cuda:{other}")
            torch.full(img.shape[:-1], 0xA5, dtype=torch.uint8, device=f"cuda:{other}")  # freed
            out = img2gray.img2gray(x)
            assert torch.cuda.current_device() == current
            assert out.device == x.device
            assert_equal(out, want, f"image on cuda:{other}, current device cuda:{current}")
            y = torch.full(img.shape[:-1], 0xA5, dtype=torch.uint8, device=f"cuda:{other}")
            img2gray.ops.img2gray(x, y)
            assert torch.cuda.current_device() == current
            assert_equal(y, want, f"out variant on cuda:{other}, current cuda:{current}")
        # then on its own device
        with torch.cuda.device(other):
            assert_equal(img2gray.img2gray(x), want, f"image on the current device cuda:{other}")
