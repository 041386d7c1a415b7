"""Campaign templates: YAML files that describe a recurring campaign and when it runs.

    # templates/bfcl-nightly.yaml
    name: bfcl-nightly            # campaigns are named <name>-<date>, e.g. bfcl-nightly-20261201
    cron: "0 2 * * *"             # when (UTC); each template becomes a Dagster schedule, stopped at first
    sources: [bfcl_v3_multi_turn]
    scheduler: envsched
    engine: simulated
    batch_size: 64
    group_size: 8
    steps: 20
    continue_from: latest         # start from the previous campaign's policy and statistics

Every other CampaignConfig field (splits, scheduler_config, engine_options, eval_every ...) may be
set too. Templates are read from ``ENVSCHED_TEMPLATES`` (a folder; default ``templates/`` in the
repository); a bad file fails the code location with a message naming the file and the field.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from campaign.config import CampaignConfig

DEFAULT_FOLDER = Path(__file__).resolve().parents[1] / "templates"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,47}")
_NOT_IN_TEMPLATE = {"campaign_id", "template"}


def _valid_cron(cron: str) -> bool:
    from dagster._utils.schedules import is_valid_cron_string

    return is_valid_cron_string(cron)


@dataclass(frozen=True)
class CampaignTemplate:
    """A recurring campaign: its name, its cron schedule (UTC) and the fields of each campaign."""

    name: str
    cron: str
    fields: dict[str, Any]
    path: Path

    @classmethod
    def from_file(cls, path: Path) -> CampaignTemplate:
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
        name, cron = data.pop("name", path.stem), data.pop("cron", None)
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"{path}: name {name!r}: use 1-48 letters, digits, '_', '.', '-'")
        if not isinstance(cron, str) or not _valid_cron(cron):
            raise ValueError(f'{path}: cron {cron!r} is not a cron expression such as "0 2 * * *"')
        allowed = {f.name for f in fields(CampaignConfig)} - _NOT_IN_TEMPLATE
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(f"{path}: unknown field(s) {unknown}; allowed: name, cron, {sorted(allowed)}")
        template = cls(name=name, cron=cron, fields=data, path=path)
        try:
            template.campaign_config(datetime(2000, 1, 1))  # every field checked now, not at the first tick
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None
        return template

    def campaign_id(self, when: datetime) -> str:
        """<name>-<date>; with the time too when the schedule fires more than once a day."""
        minute, hour = self.cron.split()[:2]
        daily = minute.isdigit() and hour.isdigit()
        return f"{self.name}-{when:%Y%m%d}" if daily else f"{self.name}-{when:%Y%m%d-%H%M}"

    def campaign_config(self, when: datetime) -> CampaignConfig:
        return CampaignConfig(campaign_id=self.campaign_id(when), template=self.name, **self.fields)

    @property
    def schedule_name(self) -> str:
        return re.sub(r"[^A-Za-z0-9_]", "_", self.name) + "_schedule"


def template_folder() -> Path:
    return Path(os.environ.get("ENVSCHED_TEMPLATES", DEFAULT_FOLDER))


def load_templates(folder: Path | None = None) -> list[CampaignTemplate]:
    """Every ``*.yaml`` / ``*.yml`` template in ``folder`` (default: ``template_folder()``), by name."""
    folder = Path(folder or template_folder())
    if not folder.is_dir():
        return []
    templates = [CampaignTemplate.from_file(p) for p in sorted(folder.glob("*.y*ml"))]
    names = [t.name for t in templates]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"{folder}: template name(s) {duplicated} used by more than one file")
    return sorted(templates, key=lambda t: t.name)
