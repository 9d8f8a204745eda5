"""Hub kernel repos -> wheels (``kernelwheel to-wheel``), and builds -> Hub kernel repos
(``build --hub-layout``, ``kernelwheel upload``); each module's part: docs/architecture.md."""
