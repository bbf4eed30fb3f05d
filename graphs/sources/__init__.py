"""One record per source gather (``source_gather.SourceGather``), one module each, registered once in
``registry.SOURCES``; every table of the rewrite, the rank layers and the lowering is derived from it."""
