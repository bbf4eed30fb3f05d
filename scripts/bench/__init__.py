"""The benchmarks (``gathermultiaxis bench JOB``): one module per job, measured as ratios within one run.

``kernel`` (the default job): the kernel and one-node sessions against NumPy, ORT's builtin gathers, the
reference and the lowered form; ``runtime``: the models a user meets, through both entry points;
``end_to_end``: whole models in fresh processes; ``lowering``: rewrite then lower against the original
models and the builtin kernels; ``bigmodel``: rewrite on a model over 2 GB and on a graph of many nodes;
``timing``: the one interleaved timing loop they share. Nothing is imported here: the command line
imports a job's module only when that job runs.
"""
