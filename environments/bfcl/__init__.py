"""BFCL-v3 multi-turn (from the ``bfcl-eval`` package) as an EnvSched source."""

from environments.bfcl.source import BfclEnvironment, BfclMultiTurnSource

__all__ = ["BfclEnvironment", "BfclMultiTurnSource"]
