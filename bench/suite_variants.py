"""The simulator suite (bench/scheduler_suite.py) with extra EnvSched rows given as SchedulerConfig overrides,
to check on the simulator a field tuned on the real environments before it becomes a default.

    PYTHONPATH=. .venv/bin/python bench/suite_variants.py --variant es:lp:learning_progress=true \
        -- --quick --regimes paper,default,private --world-seeds 100,101 --schedulers random,dps,envsched,es:lp

Everything after ``--`` goes to scheduler_suite unchanged; name each variant in its --schedulers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench import scheduler_suite
from bench.overrides import parse_variant


def main() -> None:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--variant", action="append", default=[], help="LABEL:field=value[,field=value]")
    args = parser.parse_args(argv[:split])
    for item in args.variant:
        label, overrides = parse_variant(item, {**scheduler_suite.ABLATIONS, **scheduler_suite.BASELINES})
        scheduler_suite.ABLATIONS[label] = overrides
    sys.argv = [str(Path(scheduler_suite.__file__)), *argv[split + 1 :]]
    scheduler_suite.run_suite()


if __name__ == "__main__":
    main()
