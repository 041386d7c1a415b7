"""ACEBench's agent scenarios with the original benchmark's observable behaviour (``semantics: original``)."""
