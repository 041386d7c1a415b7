"""BFCL-v3 multi-turn API classes, instantiated and driven by this project.

bfcl-eval ships the executable API classes (``GorillaFileSystem``, ``TwitterAPI``, ...). Its own
``execute_multi_turn_func_call`` caches instances in module globals (state leaks between rollouts)
and ``eval``s call strings; here every rollout builds its own instances and calls bound methods with
keyword arguments.

Isolation, because the classes keep references to what they are given (``post_tweet`` stores its
``mentions`` list and ``mention`` later extends it in place): every call runs on a private copy of its
arguments; a parameter left out whose default is mutable (``post_tweet(tags=[], mentions=[])``, one
list shared by the whole process) gets a fresh copy of the pristine default; and after loading a
scenario the instance's state is deep-copied once, detaching it from module-level tables the
long-context variants merge in by reference (``TravelAPI``'s ``CREDIT_CARD_EXTENSION`` and
``BOOKING_RECORD_EXTENSION``). Results are rendered exactly as bfcl-eval renders them (``str`` as is, ``dict``
as JSON, anything else ``str()``; an exception as ``"Error during execution: ..."``), because the
response check compares these strings.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import os
from typing import Any

from environments.base import ToolResult, private_arguments

# bfcl-eval creates result folders on import of some modules unless this points somewhere writable.
os.environ.setdefault("BFCL_PROJECT_ROOT", os.path.join(os.path.expanduser("~"), ".cache", "envsched-bfcl"))

_PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"

# class name -> (module, function-doc file). The eight classes of the multi-turn categories.
API_CLASSES: dict[str, tuple[str, str]] = {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
    "MathAPI": ("math_api", "math_api.json"),
    "MessageAPI": ("message_api", "message_api.json"),
    "TwitterAPI": ("posting_api", "posting_api.json"),
    "TicketAPI": ("ticket_api", "ticket_api.json"),
    "TradingBot": ("trading_bot", "trading_bot.json"),
    "TravelAPI": ("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
}
STATELESS_CLASSES = frozenset({"MathAPI"})

# Tools that change an instance's public state (everything else only reads). A test checks this
# table against the state changes observed when replaying every gold solution.
WRITE_TOOLS: frozenset[str] = frozenset(
    {
        # GorillaFileSystem (cd moves the working directory, which is state)
        "cd", "cp", "echo", "mkdir", "mv", "rm", "rmdir", "touch",
        # MessageAPI
        "add_contact", "delete_message", "message_login", "send_message",
        # TwitterAPI
        "authenticate_twitter", "comment", "follow_user", "mention", "post_tweet", "retweet",
        "unfollow_user",
        # TicketAPI
        "close_ticket", "create_ticket", "edit_ticket", "logout", "resolve_ticket", "ticket_login",
        # TradingBot
        "add_to_watchlist", "cancel_order", "fund_account", "place_order",
        "remove_stock_from_watchlist", "trading_login", "trading_logout", "withdraw_funds",
        # TravelAPI
        "authenticate_travel", "book_flight", "cancel_booking", "contact_customer_support",
        "purchase_insurance", "register_credit_card", "set_budget_limit",
        # VehicleControlAPI
        "activateParkingBrake", "adjustClimateControl", "fillFuelTank", "lockDoors",
        "pressBrakePedal", "releaseBrakePedal", "setCruiseControl", "setHeadlights",
        "set_navigation", "startEngine",
    }
)  # fmt: skip


# (class, method) -> {parameter: pristine mutable default}, recorded when the class is first loaded,
# before any call of ours could have mutated a shared default.
_MUTABLE_DEFAULTS: dict[tuple[str, str], dict[str, Any]] = {}


def api_class(class_name: str) -> type:
    module_name, _ = API_CLASSES[class_name]
    cls = getattr(importlib.import_module(f"{_PACKAGE}.{module_name}"), class_name)
    if not any(key[0] == class_name for key in _MUTABLE_DEFAULTS):
        _record_mutable_defaults(class_name, cls)
    return cls


def _record_mutable_defaults(class_name: str, cls: type) -> None:
    for name, function in inspect.getmembers(cls, predicate=inspect.isfunction):
        defaults = {
            p.name: copy.deepcopy(p.default)
            for p in inspect.signature(function).parameters.values()
            if isinstance(p.default, list | dict | set)
        }
        _MUTABLE_DEFAULTS[(class_name, name)] = defaults


def new_instances(
    involved_classes: list[str], initial_config: dict[str, Any], long_context: bool
) -> dict[str, Any]:
    """Fresh instances of the task's API classes, loaded with a deep copy of its initial state."""
    instances = {}
    for class_name in involved_classes:
        instance = api_class(class_name)()
        if class_name not in STATELESS_CLASSES:
            instance._load_scenario(
                copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context
            )
            # One deepcopy of the whole state: detaches module-level tables, keeps inner aliasing.
            instance.__dict__.update(copy.deepcopy(instance.__dict__))
        instances[class_name] = instance
    return instances


def method_table(instances: dict[str, Any]) -> dict[str, Any]:
    """Public method name -> bound method, over all of a task's instances."""
    table = {}
    for instance in instances.values():
        for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not name.startswith("_"):
                table[name] = method
    return table


def render_result(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def execute(methods: dict[str, Any], name: str, arguments: dict[str, Any]) -> ToolResult:
    """Run one call against a task's instances; failures become error results, never exceptions."""
    method = methods.get(name)
    if method is None:
        return ToolResult(f"Error during execution: name '{name}' is not defined", is_error=True)
    arguments = private_arguments(arguments)
    if not isinstance(arguments, dict):
        return ToolResult(f"Error during execution: arguments of {name} must be an object", is_error=True)
    fresh_defaults = _MUTABLE_DEFAULTS.get((type(method.__self__).__name__, name), {})
    arguments = {
        **{k: copy.deepcopy(v) for k, v in fresh_defaults.items() if k not in arguments},
        **arguments,
    }
    try:
        value = method(**arguments)
    except Exception as exc:  # a tool's own bug or a bad argument is the agent's error result
        return ToolResult(f"Error during execution: {exc}", is_error=True)
    is_error = isinstance(value, dict) and "error" in value
    return ToolResult(render_result(value), is_error=is_error)


def public_state(instance: Any) -> dict[str, Any]:
    """The attributes bfcl-eval's state check compares (non-underscore instance attributes)."""
    return {k: v for k, v in vars(instance).items() if not k.startswith("_")}
