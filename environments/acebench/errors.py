"""The error a scenario method raises to refuse a call; the dispatcher turns it into an error result."""


class ToolError(Exception):
    """A call the scenario refuses (not logged in, unknown id, insufficient balance, ...)."""
