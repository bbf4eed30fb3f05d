"""The conformance runner (``gathermultiaxis check``, ``gathermultiaxis policies``): rewritten models against
ORT's builtin gathers, bit for bit.

``check`` runs cases and gives verdicts; ``cases`` says where cases and their inputs come from;
``isolation`` is the child process each case runs in; ``fuzz`` draws random single-gather models;
``roundtrip`` checks rewrite-then-lower on plain ORT; ``policies`` runs a model under each out-of-range
policy. Nothing is imported here: ``from gathermultiaxis.conformance import check`` loads what it needs.
"""
