"""The simulator suite (bench/scheduler_suite.py) with extra EnvSched rows given as SchedulerConfig overrides,
to check on the simulator a field tuned on the real environments before it becomes a default.

    PYTHONPATH=. .venv/bin/python bench/suite_variants.py --variant es:lp:learning_progress=true \
        -- --quick --regimes paper,default,private --world-seeds 100,101 --schedulers random,dps,envsched,es:lp

Everything after ``--`` goes to scheduler_suite unchanged; name each variant in its --schedulers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import scheduler_suite  # noqa: E402


def parse_variant(item: str) -> tuple[str, dict]:
    """``LABEL:field=value[,field=value]`` -> (LABEL, SchedulerConfig overrides); LABEL may hold ':'."""
    label, sep, rest = item.rpartition(":")
    pairs = [part.partition("=") for part in rest.split(",") if part]
    if not sep or not label or not pairs or any(not eq for _, eq, _ in pairs):
        raise SystemExit(f"--variant {item!r}: expected LABEL:field=value[,field=value]")
    if label in scheduler_suite.ABLATIONS or label in scheduler_suite.BASELINES:
        raise SystemExit(f"--variant {item!r}: {label!r} is already a scheduler of the suite")
    return label, {key: json.loads(value) for key, _, value in pairs}


def main() -> None:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--variant", action="append", default=[], help="LABEL:field=value[,field=value]")
    args = parser.parse_args(argv[:split])
    for item in args.variant:
        label, overrides = parse_variant(item)
        scheduler_suite.ABLATIONS[label] = overrides
    sys.argv = [str(Path(scheduler_suite.__file__)), *argv[split + 1 :]]
    scheduler_suite.run_suite()


if __name__ == "__main__":
    main()
