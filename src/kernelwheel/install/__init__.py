"""``kernelwheel install``: pick the kernel build that fits the installed torch, install it pinned.
Rules and algorithm: docs/install.md; each module's part: docs/architecture.md."""
