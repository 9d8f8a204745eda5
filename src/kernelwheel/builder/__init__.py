"""Compiling one variant of a kernel project into a wheel: the request, the compile plans, the
build kinds and their shared steps, codegen, wheel metadata, and the checks before and after."""
