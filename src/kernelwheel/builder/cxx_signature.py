"""The C++ function an op schema asks for: what the load check shows an author whose kernel's
signature does not match its ``ops.def`` (torch names only the two schemas)."""

from __future__ import annotations

import re

# the parameter type torch's schema inference maps each schema type from (infer_schema.h)
_PARAMETERS = {
    "Tensor": "const at::Tensor&",
    "Tensor?": "const std::optional<at::Tensor>&",
    "Tensor[]": "at::TensorList",
    "Tensor?[]": "const c10::List<std::optional<at::Tensor>>&",
    "int": "int64_t",
    "int[]": "at::IntArrayRef",
    "SymInt": "c10::SymInt",
    "SymInt[]": "c10::SymIntArrayRef",
    "float": "double",
    "float[]": "at::ArrayRef<double>",
    "bool": "bool",
    "str": "c10::string_view",
    "Scalar": "const at::Scalar&",
    "ScalarType": "at::ScalarType",
    "Generator": "at::Generator",
    "Device": "at::Device",
    "Layout": "at::Layout",
    "MemoryFormat": "at::MemoryFormat",
}
# a return owns its value: no reference, view or ArrayRef (those of _PARAMETERS are refused)
_RETURNS = {
    "Tensor": "at::Tensor",
    "Tensor?": "std::optional<at::Tensor>",
    "Tensor[]": "std::vector<at::Tensor>",
    "int[]": "std::vector<int64_t>",
    "float[]": "std::vector<double>",
    "str": "std::string",
    "Scalar": "at::Scalar",
}


def split_arguments(text: str) -> list[str]:
    """``text`` split at its top-level commas (``Tensor(a!) x, int[2] s=[1, 2]``)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return [p for p in [*parts, text[start:].strip()] if p]


def _type(arg: str, table: dict[str, str]) -> str | None:
    """The C++ type of a schema argument or return ``arg`` (its name and default dropped)."""
    kind = arg.split("=", 1)[0].split()[0]
    mutable = "!" in kind  # Tensor(a!): the function writes it, a non-const reference
    kind = re.sub(r"\([^)]*\)|!", "", kind)  # Tensor(a!), Tensor!: a Tensor
    kind = re.sub(r"\[\d+\]", "[]", kind)  # int[2]: a list
    if mutable and kind == "Tensor":
        return "at::Tensor&"
    if found := table.get(kind) or _PARAMETERS.get(kind):
        borrowed = table is _RETURNS and re.search(r"&|Ref|List|view", found)
        return None if borrowed else found
    if kind.endswith("?") and (inner := table.get(kind[:-1]) or _PARAMETERS.get(kind[:-1])):
        return f"std::optional<{inner.removeprefix('const ').removesuffix('&')}>"
    return None


def cxx_signature(schema: str) -> str | None:
    """The C++ declaration torch infers ``schema`` (``name(args) -> returns``) from, or None
    for a type this table lacks: ``at::Tensor lin(const at::Tensor& x, ...)``."""
    match = re.fullmatch(r"\s*([\w.]+)\s*\((.*)\)\s*->\s*(.+?)\s*", schema)
    if match is None:
        return None
    name, args, returns = match[1].replace(".", "_"), split_arguments(match[2]), match[3]
    params = []
    for arg in (a for a in args if a != "*"):  # * starts the keyword-only arguments
        kind, words = _type(arg, _PARAMETERS), arg.split("=", 1)[0].split()
        if kind is None:
            return None
        params.append(f"{kind} {words[1]}" if len(words) > 1 else kind)
    outs = split_arguments(returns[1:-1]) if returns.startswith("(") else [returns]
    kinds = [_type(out, _RETURNS) for out in outs]
    if None in kinds:
        return None
    result = "void" if not kinds else str(kinds[0])
    if len(kinds) > 1:
        result = f"std::tuple<{', '.join(map(str, kinds))}>"
    return f"{result} {name}({', '.join(params)})"
