"""Compiling one variant of a kernel project into a wheel: environments, codegen, the compile
worker, cross builds, the compiler cache."""
