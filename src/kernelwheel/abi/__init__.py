"""ABI checks for kernel shared objects and wheels (``kernelwheel check``); the rules are
:class:`~kernelwheel.abi.report.Rule`'s, each described there and in ``check --help``."""
