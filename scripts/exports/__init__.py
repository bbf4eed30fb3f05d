"""Real exports (``gathermultiaxis bench build-exports DIR``): transformers models with random weights
exported by torch, and a tree ensemble; what ``bench end-to-end`` times and the slow real-export tests
rewrite. ``models.build_exports`` writes them; torch and transformers are imported only when it runs.
"""
