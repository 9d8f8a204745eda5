"""The C++ declaration a schema asks for: each below compiled and loaded under torch 2.13 as the
CPU kernel of its ops.def schema (a project with every schema kind kernels-community uses)."""

from __future__ import annotations

import pytest

from kernelwheel.builder.cxx_signature import cxx_signature

LOADED = {
    "lin(Tensor x, Tensor? bias=None) -> Tensor": (
        "at::Tensor lin(const at::Tensor& x, const std::optional<at::Tensor>& bias)"
    ),
    "fill_out(Tensor(a!) out, float v) -> ()": "void fill_out(at::Tensor& out, double v)",
    "sum_dims(Tensor x, int[] dims, bool keepdim=False) -> Tensor": (
        "at::Tensor sum_dims(const at::Tensor& x, at::IntArrayRef dims, bool keepdim)"
    ),
    "narrow_sym(Tensor x, SymInt n) -> Tensor": (
        "at::Tensor narrow_sym(const at::Tensor& x, c10::SymInt n)"
    ),
    "scale_eps(Tensor x, float eps=1e-5) -> Tensor": (
        "at::Tensor scale_eps(const at::Tensor& x, double eps)"
    ),
    "cast(Tensor x, ScalarType? dtype=None) -> Tensor": (
        "at::Tensor cast(const at::Tensor& x, std::optional<at::ScalarType> dtype)"
    ),
    "moded(Tensor x, str mode) -> Tensor": (
        "at::Tensor moded(const at::Tensor& x, c10::string_view mode)"
    ),
    "kwonly(Tensor x, *, float alpha=1.0, bool flag=False) -> Tensor": (
        "at::Tensor kwonly(const at::Tensor& x, double alpha, bool flag)"
    ),
    "split2(Tensor x) -> (Tensor, Tensor)": (
        "std::tuple<at::Tensor, at::Tensor> split2(const at::Tensor& x)"
    ),
    "cat_list(Tensor[] xs) -> Tensor": "at::Tensor cat_list(at::TensorList xs)",
    "unbind_list(Tensor x) -> Tensor[]": (
        "std::vector<at::Tensor> unbind_list(const at::Tensor& x)"
    ),
    "noise(Tensor x, Generator? gen=None) -> Tensor": (
        "at::Tensor noise(const at::Tensor& x, std::optional<at::Generator> gen)"
    ),
    "add_one.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)": (
        "at::Tensor& add_one_out(const at::Tensor& x, at::Tensor& out)"
    ),
}


@pytest.mark.parametrize("schema", LOADED)
def test_the_signature_is_the_one_that_loaded(schema: str) -> None:
    assert cxx_signature(schema) == LOADED[schema]


def test_lists_of_a_size_optionals_and_named_returns() -> None:
    assert cxx_signature("f(Tensor! o, int[2] s=[1, 2], int? k=None) -> (Tensor a, int b)") == (
        "std::tuple<at::Tensor, int64_t> f(at::Tensor& o, at::IntArrayRef s, "
        "std::optional<int64_t> k)"
    )


def test_a_return_owns_its_value() -> None:
    # a parameter borrows (const at::Tensor&, c10::string_view, at::IntArrayRef); a return
    # cannot: it would dangle
    assert cxx_signature("f(Tensor x) -> (Tensor?, str, int[], int?)") == (
        "std::tuple<std::optional<at::Tensor>, std::string, std::vector<int64_t>, "
        "std::optional<int64_t>> f(const at::Tensor& x)"
    )
    assert cxx_signature("f(Tensor x) -> SymInt[]") is None  # rather than a borrowed type


@pytest.mark.parametrize("schema", ["f(Quantizer q) -> Tensor", "not a schema"])
def test_a_type_it_does_not_know_gives_nothing_rather_than_a_guess(schema: str) -> None:
    assert cxx_signature(schema) is None
