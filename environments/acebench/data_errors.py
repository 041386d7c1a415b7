"""Tasks whose gold solution cannot pass by construction, because the source data contradicts itself.

The gold solution is the task's first milestone sequence. ACEBench uses milestones only for its
process score, so a milestone may skip a call that the end state needs, or disagree with the ground
truth. Each entry says why (found by replaying every gold solution and reading the data); a test
pins this table to exactly the tasks that ``envsched envs verify-gold --source acebench_agent`` fails,
and the verifier appends the entry to its reason when such a task fails.
"""

_SUPER_SUPREME = (
    "the milestone orders 'Super Supreme', which is not on Domino's menu ('Super Supreme Pizza'), so no "
    "order is placed; and the ground truth's reminder_list has the new reminder as key 3 / reminder_id 3 "
    "in place of the default 'To-do list' reminder (key 3, id 1003), which no tool can delete, while the "
    "defaults' reminder counter (3) gives the new reminder key 4 / id 4, as multi-turn tasks 4-7 expect"
)
_NO_FOOD_LOGIN = (
    "the milestone never calls login_food_platform, but add_food_delivery_order needs the login and the "
    "ground truth has Helen logged in with her order placed"
)
_TODO_LIST = (
    "the milestone deletes the earliest message (id 3) and sends '... 198.0 yuan.', but the ground truth "
    "deleted the most recent message (id 4, as the question asks) and holds the text without the period"
)
_NO_DEVICE_LOGIN = (
    "the device starts logged out and the milestone never calls login_device, but the ground truth has "
    "BaseApi.logged_in true"
)

KNOWN_DATA_ERRORS: dict[str, str] = {
    "agent_multi_step_0": _SUPER_SUPREME,
    "agent_multi_step_1": _SUPER_SUPREME,
    "agent_multi_step_12": _NO_FOOD_LOGIN,
    "agent_multi_step_13": _NO_FOOD_LOGIN,
    "agent_multi_step_14": _TODO_LIST,
    "agent_multi_step_15": _TODO_LIST,
    "agent_multi_step_16": f"{_NO_DEVICE_LOGIN} (viewing the reminder needs it); also {_TODO_LIST}",
    "agent_multi_step_17": _TODO_LIST,
    "agent_multi_turn_6": f"{_NO_DEVICE_LOGIN} (viewing messages and adding a reminder need it)",
}
