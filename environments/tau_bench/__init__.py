"""tau-bench retail and airline (Yao et al., 2024) as environment sources; data MIT-licensed by Sierra."""

from environments.tau_bench.source import TauBenchAirlineSource, TauBenchRetailSource

__all__ = ["TauBenchAirlineSource", "TauBenchRetailSource"]
