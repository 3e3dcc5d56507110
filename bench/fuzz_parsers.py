"""Fuzz every parser of model output and every loader of user files, >= 10,000 examples each (issue 31).

    nice -n 10 .venv/bin/python bench/fuzz_parsers.py [--examples 10000] [--only NAME_PART ...]

The properties are those of prove_assets_tests/test_fuzz.py (contracts and strategies in
prove_assets_tests/fuzz_contracts.py): each call returns its documented type or raises its typed
error naming the input. Unlike the test, a violation does not stop the run: every one is counted
(the table's `unexpected` column, which must be 0) and the first few are printed with their input.
Only hypothesis's generate phase runs (no shrinking, no example database).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # prove_assets_tests, run from anywhere

from prove_assets_tests.fuzz_contracts import ContractViolation, FuzzTarget, check, fuzz_targets  # noqa: E402


def fuzz(target: FuzzTarget, examples: int) -> tuple[Counter[str], list[tuple[str, str]], float]:
    """(outcome counts, (violation, input) pairs, seconds) of `examples` generated inputs."""
    outcomes: Counter[str] = Counter()
    violations: list[tuple[str, str]] = []

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(target.inputs)
    def run(example: object) -> None:
        try:
            outcomes[check(target, example)] += 1
        except ContractViolation as exc:
            outcomes["unexpected"] += 1
            violations.append((str(exc), repr(example)[:300]))

    started = time.monotonic()
    run()
    return outcomes, violations, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="examples per parser (default 10,000)")
    parser.add_argument("--only", nargs="*", default=[], help="run only the parsers whose name contains one of these")
    args = parser.parse_args()
    targets = [t for name, t in fuzz_targets().items() if not args.only or any(o in name for o in args.only)]
    width = max(len(t.name) for t in targets)
    print(f"{'parser':<{width}}  {'examples':>8}  {'parsed':>7}  {'rejected':>8}  {'unexpected':>10}  {'seconds':>7}")
    total_unexpected = 0
    found: list[tuple[str, str]] = []
    for target in targets:
        outcomes, violations, seconds = fuzz(target, args.examples)
        total = sum(outcomes.values())
        total_unexpected += outcomes["unexpected"]
        found += violations[:3]
        print(
            f"{target.name:<{width}}  {total:>8}  {outcomes['parsed']:>7}  {outcomes['rejected']:>8}  "
            f"{outcomes['unexpected']:>10}  {seconds:>7.1f}",
            flush=True,
        )
    for message, example in found:
        print(f"\n{message}\n  input: {example}")
    return 1 if total_unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
