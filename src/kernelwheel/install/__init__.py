"""``kernelwheel install``: pick the kernel build that fits the installed torch, install it pinned.

:mod:`kernelwheel.compat.rules` holds the compatibility rules (shared with the import guard),
:mod:`.probe` inspects the target interpreter, :mod:`.sources` lists candidate wheels,
:mod:`.select` chooses one per package, :mod:`.installed` compares it with what the target
holds, :mod:`.pipcmd` builds and runs the pip commands, and :mod:`.service` ties them
together. Rules and algorithm: docs/install.md.
"""
