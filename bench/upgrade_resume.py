"""Resume, with this checkout, campaigns that an earlier release started and that were killed mid-way.

    PYTHONPATH=. .venv/bin/python bench/upgrade_resume.py --from fb3c5a4,1372cd0

For each earlier revision: a detached git worktree of it is made beside this checkout (so that it finds
`../shared` as this one does) with this checkout's `.venv`, and in a fresh data folder it runs one campaign
per scheduler (simulated engine, BFCL multi-turn) through its own CLI until `--stop-at` steps are done, when
the process group is killed (`kill -9`). This checkout then runs `envsched campaign resume` on each. Printed
per campaign: how the resume ended, whether it rebuilt the scheduler from the campaign's history (the line
`restore_scheduler` prints), its rollouts (steps x B x G, more for DAPO / GRESO's refill rounds), how many
of them are duplicated (step, task, rollout index), and how many steps have a batch. The worktrees and data
folders are removed afterwards unless `--keep`. The revisions must have `envsched campaign run
--campaign-id` (1372cd0 has it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = "from pipelines.cli import main; main()"


def _env(code: Path, home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(code),
        "ENVSCHED_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def _run_until_killed(code: Path, home: Path, args: list[str], stop_at: int, steps: int, log: Path) -> bool:
    """Run the old CLI's `campaign run` until its progress bar shows ``stop_at``/``steps``, then kill its
    process group; True if it was killed there (False: it ended first)."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(ROOT / ".venv/bin/python"), "-c", CLI, "campaign", "run", "--steps", str(steps), *args],
            cwd=code,
            env=_env(code, home),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        marker = f" {stop_at}/{steps} ["
        while proc.poll() is None:
            if marker in log.read_text(errors="replace"):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return True
            time.sleep(0.2)
    return False


def _count(home: Path, sql: str) -> str:
    done = subprocess.run(
        [str(ROOT / ".venv/bin/envsched"), "sql", sql],
        env=_env(ROOT, home),
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip().splitlines()[-1].split()[-1] if done.returncode == 0 else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="revs", required=True, help="earlier revisions, comma-separated")
    parser.add_argument("--schedulers", default="envsched,dps,greso")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--stop-at", type=int, default=3, help="steps done when the old process is killed")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--keep", action="store_true", help="keep the worktrees and data folders")
    args = parser.parse_args()

    rows = []
    for rev in args.revs.split(","):
        code = ROOT.parent / f".upgrade-{rev}"
        home = Path(tempfile.mkdtemp(prefix=f"upgrade-{rev}-"))
        subprocess.run(["git", "worktree", "add", "--detach", "-f", str(code), rev], cwd=ROOT, check=True)
        (code / ".venv").symlink_to(ROOT / ".venv")
        try:
            # Every campaign is started by the earlier release before this checkout touches the data folder
            # (the first `envsched` command of this checkout migrates the warehouse past that release).
            killed = {}
            for scheduler in args.schedulers.split(","):
                campaign_id = f"up-{scheduler}"
                options = ["--campaign-id", campaign_id, "--scheduler", scheduler]
                killed[scheduler] = _run_until_killed(
                    code,
                    home,
                    [*options, "--batch-size", str(args.batch_size)],
                    args.stop_at,
                    args.steps,
                    home / f"{campaign_id}-old.log",
                )
            for scheduler in args.schedulers.split(","):
                campaign_id = f"up-{scheduler}"
                resumed = subprocess.run(
                    [str(ROOT / ".venv/bin/envsched"), "campaign", "resume", campaign_id],
                    env=_env(ROOT, home),
                    capture_output=True,
                    text=True,
                    check=False,
                )
                output = resumed.stdout + resumed.stderr
                ended = "completed" if resumed.returncode == 0 else output.strip().splitlines()[-1][:90]
                where = f"FROM rollouts WHERE campaign_id = '{campaign_id}'"
                rows.append(
                    (
                        rev,
                        scheduler,
                        args.stop_at if killed[scheduler] else "never (ended first)",
                        ended,
                        "yes" if "Rebuilt from its history" in output else "no",
                        _count(home, f"SELECT count(*) {where}"),
                        _count(
                            home, f"SELECT count(*) - count(DISTINCT (step, task_id, rollout_idx)) {where}"
                        ),
                        _count(
                            home,
                            "SELECT count(DISTINCT step) FROM batches WHERE round = 0 AND "
                            f"campaign_id = '{campaign_id}'",
                        ),
                    )
                )
                print(" | ".join(map(str, rows[-1])), flush=True)
        finally:
            if not args.keep:
                subprocess.run(["git", "worktree", "remove", "--force", str(code)], cwd=ROOT, check=False)
                shutil.rmtree(home, ignore_errors=True)

    print()
    print(
        "| from | scheduler | killed after step | resumed by this checkout | rebuilt | rollouts | duplicated | steps |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")
    sys.exit(0 if all(r[3] == "completed" for r in rows) else 1)


if __name__ == "__main__":
    main()
