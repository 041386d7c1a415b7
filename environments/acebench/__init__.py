from environments.acebench.source import (
    AceBenchAgentSource,
    OriginalAceBenchEnvironment,
    PolicyAceBenchEnvironment,
)

__all__ = ["AceBenchAgentSource", "OriginalAceBenchEnvironment", "PolicyAceBenchEnvironment"]
