"""Synthetic environments generated from a seed (source ``synthetic``), for scale and structure tests.

Generative model
----------------
``SyntheticSource(envs=N, tasks_per_env=M, seed=S, families=F)`` describes N environments; environment
i belongs to family ``F[i % len(F)]`` and is drawn from its own random stream ``(S, family, i)``, and
task j of it from ``(S, family, i, j)``. So the catalogue, every content hash and every task are
functions of the options alone, and any task can be regenerated without generating the others.

*Family* (``families.py``): fixes the table roles, field roles and tool shapes. ``ticketing`` (people
and tickets: create / update / assign / close, optional start / reopen / set availability),
``inventory`` (locations and items: add / reprice / move / restock / sell / remove, optional
recategorize), ``booking`` (resources and bookings: book / reschedule / cancel, optional resize /
switch resource), ``ledger`` (accounts and movement entries: open / deposit / withdraw / transfer /
freeze / unfreeze, optional change tier). Every table also has get-by-id and search tools.

*Environment*: a family plus a *theme* (``themes.py``: IT helpdesk, bug tracker, pharmacy chain,
restaurant, bank, ...) that names the tables and supplies record labels, and per-environment draws of
field names (``priority``/``urgency``/``severity``), tool verbs (``close``/``resolve``/``complete``),
enum values, optional tools, table sizes and the initial records. State is a set of tables of records
with typed fields (str, int, float, bool, enum, ref); tools (``backend.py``) validate arguments (types,
ranges, enums, referenced ids, guards such as "only open tickets can be closed", table constraints
such as "party size fits the table" or "no double booking") and return errors as results.

*Task* (``tasks.py``): 1-4 write steps planned on a copy of the initial state; a step names records by
id or by title/name (then a search call precedes the write), so gold sequences have 1-8 calls. About
40% of tasks of 2+ steps are split over 2-3 user turns. Text comes from templates (``text.py``) that
vary the opener, request form, clause, connector and closer. The goal is the diff between the
initial and the simulated final state; the verifier (``verifier.py``) replays a trajectory on a fresh
copy and gives reward 1 iff the final state equals initial + goal diff, else 0 with the first
differing table/record/field as the reason.
"""

from environments.synthetic.source import SyntheticEnvironment, SyntheticSource

__all__ = ["SyntheticEnvironment", "SyntheticSource"]
