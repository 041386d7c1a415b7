"""Adapters that let trainers people already use (TRL's GRPOTrainer, veRL) take their prompts from EnvSched
or a baseline scheduler: ``training.integrations.trl`` and ``training.integrations.verl``."""
