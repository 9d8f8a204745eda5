"""Which build may load into which interpreter: the compatibility rules (:mod:`.rules`,
standard library only), a variant's facts for them (:mod:`.builds`), the import guard that
embeds them in every wheel (:mod:`.guard`) and the one-shot probe of an interpreter
(:mod:`.interpreter`). Below ``plan``, ``install``, ``hub`` and ``builder``, which all use it."""
