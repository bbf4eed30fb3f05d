"""Property run: random single-node Gather / GatherElements / GatherND models (the fuzzer's cases,
``gathermultiaxis.conformance.fuzz``: every op, opset, data type, rank 0-5, zero and one dims, negative and
out-of-range indices, static / symbolic / rank-only declared shapes), the builtin ORT kernel against
the rewrite, in this process. ``pytest --property-cases N`` runs more than the default 2000."""

from gathermultiaxis.conformance.check_case import check_case
from gathermultiaxis.conformance.fuzz import fuzz_case

FIRST_SEED = 100_000  # apart from the seeds test_check.py runs through the command line


def test_property_kernel_vs_builtin(request, report_line):
    cases = request.config.getoption("--property-cases")
    seen = {"passed": 0, "both raised": 0, "builtin wrong": 0}
    for seed in range(FIRST_SEED, FIRST_SEED + cases):
        case = fuzz_case(seed)
        result = check_case(case)
        assert result.verdict in ("passed", "builtin wrong"), (case.name, result.detail)
        if result.verdict == "builtin wrong":  # only ORT's known string Gather bug may be excused
            assert case.name.split(": ")[1].startswith("Gather-") and "STRING" in case.name, (case.name, result.detail)
        assert result.compared == 1
        seen[result.verdict] += 1
        seen["both raised"] += result.both_raised
    total = seen["passed"] + seen["builtin wrong"]
    report_line(f"property kernel vs ORT builtin: {total} fuzz cases (seeds {FIRST_SEED}-{FIRST_SEED + cases - 1}), "
                f"{seen['passed']} identical ({seen['both raised']} of them raising on both sides), "
                f"{seen['builtin wrong']} where ORT's builtin string Gather is wrong")
    assert total == cases
