"""Lines logged on the `envsched.progress` logger while an asset runs also go to the Dagster run's event log.

Code below the assets (`pipelines.campaign`: a scheduler rebuilt from its history) has no Dagster context;
it logs on `envsched.progress`, which the CLI prints. Without this, a run the daemon launched (from the UI, a
sensor or a schedule) left those lines in the run process's stderr only. Inside `progress_to_run_log` each
line the logger lets through (a rebuild is a warning) is also logged through the asset's `context.log`, so
the UI's run view shows it and `DagsterInstance.all_logs` returns it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

PROGRESS = logging.getLogger("envsched.progress")


class _ToRunLog(logging.Handler):
    def __init__(self, run_log: logging.Logger):
        super().__init__()
        self.run_log = run_log

    def emit(self, record: logging.LogRecord) -> None:
        self.run_log.log(record.levelno, record.getMessage())


@contextmanager
def progress_to_run_log(context) -> Iterator[None]:
    """While the body runs, forward `envsched.progress` lines to ``context.log`` (at their own level)."""
    handler = _ToRunLog(context.log)
    PROGRESS.addHandler(handler)
    try:
        yield
    finally:
        PROGRESS.removeHandler(handler)
