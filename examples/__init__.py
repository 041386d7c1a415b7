"""Examples a user copies: an environment source of their own (`kv_store.py`)."""
