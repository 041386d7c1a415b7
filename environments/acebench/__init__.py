from environments.acebench.source import AceBenchAgentSource, AceBenchEnvironment

__all__ = ["AceBenchAgentSource", "AceBenchEnvironment"]
