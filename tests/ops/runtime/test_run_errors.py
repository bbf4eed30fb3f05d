"""ops/runtime/run_errors.py: an op's error kept under its run's token until that run pops it."""

from gathermultiaxis.ops.runtime.run_errors import RunErrors


def test_the_first_error_of_a_run_wins_and_is_popped_once():
    errors = RunErrors()
    token, other = errors.new_token(), errors.new_token()
    assert token != other
    first = ValueError("first")
    errors.record(token, first)
    errors.record(token, KeyError("second"))
    assert errors.pop(other) is None
    popped = errors.pop(token)
    assert type(popped) is ValueError and str(popped) == "GatherMultiaxis: first"  # rebuilt, naming the op
    assert errors.pop(token) is None
