"""Project-level kernel locking: ``kernelwheel lock`` and ``kernelwheel download``
(docs/lockfile.md); each module's part: docs/architecture.md."""
