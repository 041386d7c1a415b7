"""What a campaign is: its config (validated when built), the schedulers and engines it can name,
the step it runs, and its templates. Used by the pipelines, the CLI, the benchmarks and the tests.

    from campaign import CampaignConfig
    config = CampaignConfig(campaign_id="demo", scheduler="envsched", steps=5)   # raises on bad input
"""

from campaign.config import CampaignConfig
from campaign.registry import ENGINES, SCHEDULERS

__all__ = ["ENGINES", "SCHEDULERS", "CampaignConfig"]
