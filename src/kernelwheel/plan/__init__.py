"""What to build: options resolved once from every layer, variant selection, the matrix plan."""
