"""Real exports with random weights (``bench build-exports DIR``); ``models.build_exports`` writes them."""
