"""Where ACEBench's gold solutions contradict the ground truth: corrections, and the tasks left failing.

The gold solution of a task is its first milestone sequence. ACEBench uses milestones only for its
process score, so a milestone may skip a call that the end state needs, or disagree with the ground
truth. Replaying every gold solution and reading the data found 9 such tasks (each reason below says
what is wrong); all 9 are real errors of the original data. Two tables:

- ``GOLD_CORRECTIONS`` (all 9 tasks): the ground truth is reachable with the task's own tools under the
  original's rule, so the gold solution is the first milestone with a few explicit edits (insert a call
  before a given call, or replace a call). ``data.load_data`` applies them when it builds the catalogue:
  ``Task.gold`` is the corrected sequence, ``metadata["milestones"]`` keeps the original milestones (the
  process score is unchanged) and ``metadata["gold_correction"]`` records the edits and the reason. Each
  edit names the exact call it expects in the milestone; if the data no longer has it, loading fails
  (SourceDataError) rather than applying a stale correction. Every corrected gold passes the original's
  own evaluation (recorded in ``tests/data/acebench_original``).
- ``KNOWN_DATA_ERRORS`` (2 of them): tasks whose ground truth stays unreachable under the project's
  strict check (``semantics: policy`` or ``end_state: strict``), which also checks the classes the
  answers misspell. They fail ``envsched envs verify-gold --source acebench_agent --option
  semantics=policy``, and the strict verifier appends the entry to its reason. A test pins this table to
  exactly the tasks that verify-gold fails there. In the default semantics verify-gold passes 50/50.

Neither table changes the ground truth or the verifier.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Insert:
    """Put ``call`` just before the milestone call ``before`` (both in milestone syntax)."""

    before: str
    call: str

    def describe(self) -> str:
        return f"insert {self.call} before {self.before}"


@dataclass(frozen=True)
class Replace:
    """Replace the milestone call ``old`` by ``new`` (both in milestone syntax)."""

    old: str
    new: str

    def describe(self) -> str:
        return f"replace {self.old} by {self.new}"


Edit = Insert | Replace


@dataclass(frozen=True)
class GoldCorrection:
    reason: str  # what is wrong with the milestone, and why the edits are right
    edits: tuple[Edit, ...]  # applied in order to the first milestone sequence


# -- the ground truth is unreachable under the project's strict check (``semantics: policy``) ------------

_REMINDER_KEY = (
    "the ground truth's reminder_list has the new reminder as key 3 / reminder_id 3 in place of the default "
    "'To-do list' reminder (key 3, id 1003), which no tool of the task can delete, while the defaults' "
    "reminder counter (3) gives the new reminder key 4 / id 4, as multi-turn tasks 4-7 expect. The original "
    "never checks it: the class is spelt 'ReminderAPI' there, and its evaluation skips misspelt classes"
)

# Left failing only by the strict, corrected-spelling check of ``semantics: policy``.
KNOWN_DATA_ERRORS: dict[str, str] = {
    "agent_multi_step_0": _REMINDER_KEY,
    "agent_multi_step_1": _REMINDER_KEY,
}

# -- the ground truth is reachable: the gold solution is the corrected milestone -----------------------

_NO_FOOD_LOGIN = (
    "the milestone never calls login_food_platform, but add_food_delivery_order needs the login and the "
    "ground truth has Helen logged in to the platform (logged_in_users ['Helen']) with her order placed; "
    "the gold logs her in (password from the question) just before the order"
)
_TODO_LIST = (
    "the milestone deletes the earliest message (id 3) and sends '... 198.0 yuan.', but the question asks "
    "to delete the most recent message and the ground truth deleted message 4 (the latest, 2024-09-09) and "
    "holds the text without the period; the gold asks for the latest message id, deletes 4 and sends the "
    "text as the ground truth has it"
)
_NO_DEVICE_LOGIN = (
    "the device starts logged out and the milestone never calls login_device, but the ground truth has "
    "BaseApi.logged_in true; the gold logs in to the device first"
)

_LOGIN_HELEN = Insert(
    before="add_food_delivery_order(username='Helen', merchant_name='Heytea', "
    "items=[{'product': 'Four Seasons Spring Milk Tea', 'quantity': 1}])",
    call="login_food_platform(username='Helen', password='password321')",
)
_DELETE_LATEST = (
    Replace(old="get_earliest_message_id()", new="get_latest_message_id()"),
    Replace(old="delete_message(message_id=3)", new="delete_message(message_id=4)"),
    Replace(
        old="send_message(sender_name='Eve', receiver_name='Frank', "
        "message='The price of the purchased goods is 198.0 yuan.')",
        new="send_message(sender_name='Eve', receiver_name='Frank', "
        "message='The price of the purchased goods is 198.0 yuan')",
    ),
)

_SUPER_SUPREME = (
    "the milestone orders 'Super Supreme', which is not on Domino's menu, so no order is placed, but the "
    "question asks for the 'Super Supreme Pizza' and the ground truth has it ordered (88.0, balance 412.0); "
    "the gold orders the menu's product"
)
_ORDER_PIZZA = Replace(
    old="add_food_delivery_order(username='Eve', merchant_name='Domino's', "
    "items=[{'product': 'Super Supreme', 'quantity': 1}])",
    new="add_food_delivery_order(username='Eve', merchant_name='Domino\\'s', "
    "items=[{'product': 'Super Supreme Pizza', 'quantity': 1}])",
)

GOLD_CORRECTIONS: dict[str, GoldCorrection] = {
    "agent_multi_step_0": GoldCorrection(_SUPER_SUPREME, (_ORDER_PIZZA,)),
    "agent_multi_step_1": GoldCorrection(_SUPER_SUPREME, (_ORDER_PIZZA,)),
    "agent_multi_step_12": GoldCorrection(_NO_FOOD_LOGIN, (_LOGIN_HELEN,)),
    "agent_multi_step_13": GoldCorrection(_NO_FOOD_LOGIN, (_LOGIN_HELEN,)),
    "agent_multi_step_14": GoldCorrection(_TODO_LIST, _DELETE_LATEST),
    "agent_multi_step_15": GoldCorrection(_TODO_LIST, _DELETE_LATEST),
    "agent_multi_step_16": GoldCorrection(
        f"{_NO_DEVICE_LOGIN} (viewing the reminder needs it); also {_TODO_LIST}",
        (Insert(before="view_reminder_by_title(title='To-do list')", call="login_device()"), *_DELETE_LATEST),
    ),
    "agent_multi_step_17": GoldCorrection(_TODO_LIST, _DELETE_LATEST),
    "agent_multi_turn_6": GoldCorrection(
        f"{_NO_DEVICE_LOGIN} (viewing messages and adding a reminder need it)",
        (
            Insert(
                before="view_messages_between_users(sender_name='Eve', receiver_name='Frank')",
                call="login_device()",
            ),
        ),
    ),
}
