"""Under a real `dagster dev` (webserver + daemon): a real browser (Debian's chromium, driven by
Playwright) starts a campaign from the Launchpad of `start_campaign`, and `envsched campaign start`
submits one from the shell; the daemon runs both to `completed` with no further action. The shell's
other commands hand campaigns to that daemon too, and say so when they cannot follow them."""

import json
import shutil
import time
from pathlib import Path

import pytest

from pipelines.dev_server import dagster_dev
from pipelines.paths import Paths
from warehouse.store import Warehouse

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
CAMPAIGN = "ui-browser"
# Typed into the Launchpad's editor: 2 steps, the simulated engine, a small batch.
LAUNCH_CONFIG = (
    "ops: {register_campaign: {config: {campaign_id: ui-browser, steps: 2, engine: simulated, "
    "scheduler: envsched, splits: [base], batch_size: 8, group_size: 4, eval_every: 0}}}"
)


@pytest.fixture(scope="module")
def ui(tmp_path_factory, prepared_warehouse):
    """(URL, home, log) of `dagster dev` over a copy of the prepared warehouse."""
    tmp = tmp_path_factory.mktemp("ui")
    home = Paths(tmp / "home").ensure()
    shutil.copy(prepared_warehouse, home.warehouse)
    with dagster_dev(home.home, log=tmp / "dagster-dev.log") as url:
        yield url, home, tmp / "dagster-dev.log"


def _wait_for_status(store: Warehouse, wanted: str, timeout_s: float, campaign_id: str = CAMPAIGN) -> str:
    deadline, status = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        if store.path.exists() and not store.campaign_overview(campaign_id).empty:
            status = store.campaign(campaign_id)["status"]
            if status in (wanted, "failed"):
                return status
        time.sleep(2)
    return f"timed out at status {status}"


@pytest.mark.slow
def test_ui_browser_launchpad_starts_a_campaign_the_daemon_completes(ui, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    assert CHROMIUM.exists(), (
        "Debian's chromium is missing: `make test` installs it (apt-get install chromium)"
    )
    url, home, log_path = ui
    store = Warehouse(home.warehouse)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            page.goto(f"{url}/locations/pipelines.definitions/jobs/start_campaign/playground")
            editor = page.locator(".CodeMirror").first
            editor.click()
            page.keyboard.press("Control+A")
            page.keyboard.insert_text(LAUNCH_CONFIG)
            page.get_by_role("button", name="Launch Run").click()
            page.wait_for_url("**/runs/**")

            status = _wait_for_status(store, "completed", timeout_s=420)
            log = log_path.read_text(errors="replace")[-3000:]
            assert status == "completed", f"campaign {status}: {store.campaign_overview(CAMPAIGN)}\n{log}"

            # The runs the daemon launched, found by the campaign tag.
            page.goto(f"{url}/runs?q%5B0%5D=tag%3Aenvsched%2Fcampaign%3D{CAMPAIGN}")
            for job in ("start_campaign", "plan_step", "train_step", "ingest_rollouts"):
                expect(page.get_by_role("link", name=job).first).to_be_visible()
            # The status and the per-step metrics, in the materialisations of the campaign's partition.
            page.goto(f"{url}/assets/scheduled_batch?partition={CAMPAIGN}")
            expect(page.get_by_text("campaign completed its 2 steps").first).to_be_visible()
            page.goto(f"{url}/assets/variance_predictions?partition={CAMPAIGN}")
            expect(page.get_by_text("metrics_by_step").first).to_be_visible()
            expect(page.get_by_text("mean_sel_var").first).to_be_visible()
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
        finally:
            browser.close()


@pytest.mark.slow
def test_ui_cli_campaign_start_returns_at_once_and_the_daemon_completes_it(ui, monkeypatch):
    from click.testing import CliRunner

    from pipelines.cli import main

    url, home, log_path = ui
    monkeypatch.setenv("ENVSCHED_HOME", str(home.home))
    monkeypatch.setenv("DAGSTER_HOME", str(home.dagster_home))  # the CLI sets it; restored after the test
    args = ["campaign", "start", "--steps", "3", "--campaign-id", "cli-start", "--split", "base"]
    args += ["--batch-size", "8", "--group-size", "4", "--eval-every", "0", "--ui-url", url]
    started = time.monotonic()
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "submitted" in result.output and time.monotonic() - started < 30  # returns at once
    assert "warning" not in result.output  # the UI's own data folder: its daemon runs the campaign
    store = Warehouse(home.warehouse)
    status = _wait_for_status(store, "completed", timeout_s=420, campaign_id="cli-start")
    assert status == "completed", f"{status}\n{log_path.read_text(errors='replace')[-3000:]}"
    assert store.progress("cli-start")["observed"] == 3
    shown = CliRunner().invoke(main, ["campaign", "status", "cli-start"])
    assert shown.exit_code == 0 and "completed" in shown.output and "3/3" in shown.output
    assert "mean_sel_var" in shown.output


@pytest.mark.slow
def test_ui_cli_resume_goes_through_the_daemon_and_a_refused_start_is_an_error(ui, monkeypatch):
    """A failed campaign is resumed through the daemon, not beside it in the CLI's process (both would
    advance it); a `start_campaign` run that refuses the config fails the command instead of reporting
    the campaign already stored under that id."""
    from click.testing import CliRunner

    from pipelines.campaign import CampaignConfig
    from pipelines.cli import main

    url, home, log_path = ui
    monkeypatch.setenv("ENVSCHED_HOME", str(home.home))
    monkeypatch.setenv("DAGSTER_HOME", str(home.dagster_home))
    config = CampaignConfig("cli-resume", splits=["base"], batch_size=8, group_size=4, eval_every=0, steps=1)
    store = Warehouse(home.warehouse)
    with store.transaction() as conn:  # one statement: the daemon never sees it other than failed
        conn.execute(
            "INSERT INTO campaigns VALUES (?, ?, 'envsched', 'failed', 'plan_step of step 1: a stray file', "
            "now(), now())",
            [config.campaign_id, json.dumps(config.to_dict(), sort_keys=True)],
        )

    refused = CliRunner().invoke(main, ["campaign", "resume", "cli-resume"])
    assert refused.exit_code == 1 and "--force" in refused.output
    resumed = CliRunner().invoke(main, ["campaign", "resume", "cli-resume", "--force"])
    log = log_path.read_text(errors="replace")[-3000:]
    assert resumed.exit_code == 0, f"{resumed.output}\n{log}"
    assert f"submitted to {url}" in resumed.output  # the daemon ran it: the CLI only waited
    assert store.campaign("cli-resume")["status"] == "completed"
    assert store.progress("cli-resume")["observed"] == 1

    args = ["campaign", "run", "--steps", "2", "--campaign-id", "cli-resume", "--split", "base"]
    args += ["--batch-size", "8", "--group-size", "4", "--eval-every", "0", "--ui-url", url]
    conflict = CliRunner().invoke(main, args)  # the same id with another config: register_campaign refuses
    assert conflict.exit_code == 1, conflict.output
    assert "not started" in conflict.output and "exists with a different config" in conflict.output


@pytest.mark.slow
def test_ui_cli_campaign_start_from_another_data_folder_warns(ui, tmp_path, monkeypatch):
    """`var` is relative to where a command runs: a shell elsewhere submits to the UI, whose daemon keeps
    the campaign in its own folder, so this folder's `campaign status` will not show it; say so."""
    from click.testing import CliRunner

    from pipelines.cli import main

    url, _, _ = ui
    other = Paths(tmp_path / "elsewhere").ensure()
    monkeypatch.setenv("ENVSCHED_HOME", str(other.home))
    monkeypatch.setenv("DAGSTER_HOME", str(other.dagster_home))
    args = ["campaign", "start", "--steps", "1", "--campaign-id", "cli-elsewhere", "--split", "base"]
    args += ["--batch-size", "8", "--group-size", "4", "--eval-every", "0", "--ui-url", url]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0 and f"submitted to {url}" in result.output
    assert f"warning: no Dagster daemon runs on this data folder ({other.home})" in result.output
    # start-and-wait from here: it cannot follow a campaign this folder's warehouse lacks
    args[1:6] = ["run", "--steps", "1", "--campaign-id", "cli-elsewhere-2"]
    waited = CliRunner().invoke(main, args)
    assert waited.exit_code == 1, waited.output
    assert f"keeps it in another data folder than this one ({other.home})" in waited.output


@pytest.mark.slow
def test_ui_cli_run_on_a_webserver_without_its_daemon_stops_instead_of_waiting(tmp_path, monkeypatch):
    """Only the daemon launches queued runs: a `start_campaign` run queued on a webserver started alone
    fails the command with the reason, instead of waiting for ever."""
    from click.testing import CliRunner

    from pipelines import submit
    from pipelines.cli import main

    home = Paths(tmp_path / "home").ensure()
    monkeypatch.setenv("ENVSCHED_HOME", str(home.home))
    monkeypatch.setenv("DAGSTER_HOME", str(home.dagster_home))
    monkeypatch.setattr(submit, "QUEUED_GRACE_S", 3.0)
    with dagster_dev(home.home, log=tmp_path / "webserver.log", daemon=False) as url:
        args = ["campaign", "run", "--steps", "1", "--campaign-id", "queued", "--ui-url", url]
        result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert (
        "campaign queued not started" in result.output
        and "still queued and no Dagster daemon" in result.output
    )
