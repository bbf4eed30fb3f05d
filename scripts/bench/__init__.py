"""The benchmarks (``gathermultiaxis bench JOB``), one module per job, measured as ratios within one run;
``timing`` is the interleaved loop they share. Nothing is imported here."""
