"""Which build may load into which interpreter: the rules (:mod:`.rules`, stdlib only), a variant's
facts for them (:mod:`.builds`), the import guard (:mod:`.guard`) and the interpreter probe
(:mod:`.interpreter`). Below ``plan``, ``install``, ``hub`` and ``builder``."""
