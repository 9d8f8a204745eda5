"""Where a variant compiles: its build environment, the CUDA toolkit and the toolkit store, cross
compilers and sysroots, the compiled kernels' header dependencies, the compiler cache."""
