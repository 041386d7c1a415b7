"""Policies trained on CPU by the rollout engines (the LLM policies live with their engines)."""
