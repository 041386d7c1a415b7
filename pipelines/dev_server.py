"""`dagster dev` (webserver + daemon) on a free localhost port over one data folder, as a context
manager: for the browser test and the UI benchmark. It runs in its own process group with default
signal handlers, and the whole group is stopped on exit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pipelines.paths import Paths


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _reset_signals() -> None:
    # A process started from a background job inherits SIGINT ignored; dagster dev must be stoppable.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def dagster_dev(
    home: Path,
    code_root: Path | None = None,
    log: Path | None = None,
    ready_timeout_s: float = 180.0,
    daemon: bool = True,
) -> Iterator[str]:
    """Start `dagster dev -m pipelines.definitions` with ENVSCHED_HOME=``home`` (its instance under
    ``home/dagster``); yields the UI's URL once the code location has loaded. ``daemon=False`` starts the
    webserver alone (`dagster-webserver`): submitted runs then stay queued."""
    paths = Paths(Path(home).resolve()).ensure()
    port = free_port()
    root = Path(code_root or Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "ENVSCHED_HOME": str(paths.home),
        "DAGSTER_HOME": str(paths.dagster_home),
        "PYTHONPATH": str(root),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    command = ["dagster", "dev"] if daemon else ["dagster-webserver"]
    command[0] = str(Path(sys.executable).with_name(command[0]))
    out = open(log or paths.home / "dagster-dev.log", "ab")  # closed below
    process = subprocess.Popen(
        [*command, "-m", "pipelines.definitions", "-h", "127.0.0.1", "-p", str(port)],
        cwd=root,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, stopped as a whole below
        preexec_fn=_reset_signals,
    )
    url = f"http://127.0.0.1:{port}"
    paths.ui_url.write_text(url)
    try:
        _wait_ready(url, process, ready_timeout_s)
        yield url
    finally:
        _stop(process)
        out.close()


def _wait_ready(url: str, process: subprocess.Popen, timeout_s: float) -> None:
    query = b'{"query": "{ workspaceOrError { ... on Workspace { locationEntries { loadStatus } } } }"}'
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dagster dev exited with code {process.returncode} before it was ready")
        try:
            request = urllib.request.Request(
                f"{url}/graphql", data=query, headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=5) as response:
                if b"LOADED" in response.read():
                    return
        except OSError:
            pass
        time.sleep(1.0)
    raise TimeoutError(f"dagster dev at {url} not ready after {timeout_s:.0f}s")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    group = os.getpgid(process.pid)
    os.killpg(group, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(group, signal.SIGKILL)
        process.wait(timeout=10)
    # children dagster dev started (webserver, daemon, code servers) share the group
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass
