"""New kernel projects: ``kernelwheel init`` writes one from the templates in ``templates/``."""
