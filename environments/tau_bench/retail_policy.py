"""Retail domain tools of the ``policy`` mode (opt-in), re-implemented from tau-bench's tool descriptions
(``retail/tools.json``) and rules (``retail/policy.md``). Tables: ``users``, ``orders``, ``products``.

Effects follow the descriptions: cancelling refunds every payment (a gift card at once, by adding to
its balance); modifying items re-prices the order and charges or refunds the difference on the given
method; a return or exchange of a delivered order only records the request (status ``return
requested`` / ``exchange requested``). What the policy leaves to the agent (confirmation, identity
checks) is not enforced here; what the tools themselves reject is.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from environments.tau_bench.db import Database
from environments.tau_bench.toolkit import COMMON_TOOLS, Tool, ToolError, dump, money

TABLES = ("users", "orders", "products")
CANCEL_REASONS = ("no longer needed", "ordered by mistake")


def _order(db: Database, order_id: str) -> dict[str, Any]:
    if db.get("orders", order_id) is None:
        raise ToolError("order not found")
    return db.get("orders", order_id)


def _user(db: Database, user_id: str) -> dict[str, Any]:
    if db.get("users", user_id) is None:
        raise ToolError("user not found")
    return db.get("users", user_id)


def _payment_method(db: Database, user_id: str, payment_method_id: str) -> dict[str, Any]:
    method = _user(db, user_id)["payment_methods"].get(payment_method_id)
    if method is None:
        raise ToolError("payment method not found")
    return method


def _require_status(order: dict[str, Any], status: str, verb: str) -> None:
    if order["status"] != status:
        raise ToolError(f"non-{status} order cannot be {verb}")


def _check_items_in_order(order: dict[str, Any], item_ids: list[str]) -> None:
    """Each id must be in the order as many times as it is listed (duplicates are allowed)."""
    have = Counter(item["item_id"] for item in order["items"])
    for item_id, count in Counter(item_ids).items():
        if have[item_id] < count:
            raise ToolError(f"item {item_id} not found in order {order['order_id']}")


def _price_difference(db: Database, order: dict[str, Any], item_ids: list[str], new_item_ids: list[str]):
    """Price change of swapping each item for the new item at the same position, and the new variants.
    A new item must be an available variant of the same product; the tool accepts the same item (the
    gold actions of many tasks list unchanged items alongside changed ones), which changes nothing."""
    if len(item_ids) != len(new_item_ids):
        raise ToolError("the number of items to be exchanged should match")
    _check_items_in_order(order, item_ids)
    by_id = {item["item_id"]: item for item in order["items"]}
    difference, variants = 0.0, []
    for old_id, new_id in zip(item_ids, new_item_ids, strict=True):
        old = by_id[old_id]
        product = db.get("products", old["product_id"])
        variant = (product or {}).get("variants", {}).get(new_id)
        if variant is None or not variant["available"]:
            raise ToolError(f"new item {new_id} not found or available")
        difference += variant["price"] - old["price"]
        variants.append(variant)
    return money(difference), variants


def _charge(db: Database, user_id: str, method_id: str, amount: float, why: str) -> None:
    """Check that a gift card covers ``amount`` (> 0 means the user pays)."""
    method = _payment_method(db, user_id, method_id)
    if method["source"] == "gift_card" and amount > method["balance"]:
        raise ToolError(f"insufficient gift card balance to pay for {why}")


def _adjust_gift_card(db: Database, user_id: str, method_id: str, delta: float) -> None:
    """Add ``delta`` to a gift card's balance; other methods settle outside the database."""
    method = db.get("users", user_id)["payment_methods"].get(method_id)
    if method is not None and method["source"] == "gift_card":
        method = db.edit("users", user_id)["payment_methods"][method_id]
        method["balance"] = money(method["balance"] + delta)


# --- read tools -----------------------------------------------------------------------------------


def find_user_id_by_email(db: Database, email: str) -> str:
    for user_id, user in db.tables["users"].items():
        if user["email"].lower() == email.lower():
            return user_id
    raise ToolError("user not found")


def find_user_id_by_name_zip(db: Database, first_name: str, last_name: str, zip: str) -> str:
    for user_id, user in db.tables["users"].items():
        name = user["name"]
        if (
            name["first_name"].lower() == first_name.lower()
            and name["last_name"].lower() == last_name.lower()
            and user["address"]["zip"] == zip
        ):
            return user_id
    raise ToolError("user not found")


def get_order_details(db: Database, order_id: str) -> str:
    return dump(_order(db, order_id))


def get_product_details(db: Database, product_id: str) -> str:
    product = db.get("products", product_id)
    if product is None:
        raise ToolError("product not found")
    return dump(product)


def get_user_details(db: Database, user_id: str) -> str:
    return dump(_user(db, user_id))


def list_all_product_types(db: Database) -> str:
    names = {p["name"]: p["product_id"] for p in db.tables["products"].values()}
    return dump(dict(sorted(names.items())))


# --- write tools ----------------------------------------------------------------------------------


def cancel_pending_order(db: Database, order_id: str, reason: str) -> str:
    order = _order(db, order_id)
    _require_status(order, "pending", "cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError(f"invalid reason: should be one of {list(CANCEL_REASONS)}")
    order = db.edit("orders", order_id)
    refunds = [
        {"transaction_type": "refund", "amount": p["amount"], "payment_method_id": p["payment_method_id"]}
        for p in order["payment_history"]
        if p["transaction_type"] == "payment"
    ]
    for refund in refunds:  # gift cards are refunded at once; other methods in 5-7 business days
        _adjust_gift_card(db, order["user_id"], refund["payment_method_id"], refund["amount"])
    order["payment_history"].extend(refunds)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    return dump(order)


def modify_pending_order_address(
    db: Database, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> str:
    _require_status(_order(db, order_id), "pending", "modified")
    order = db.edit("orders", order_id)
    order["address"] = _address(address1, address2, city, state, country, zip)
    return dump(order)


def modify_pending_order_items(
    db: Database, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> str:
    order = _order(db, order_id)
    _require_status(order, "pending", "modified")
    difference, variants = _price_difference(db, order, item_ids, new_item_ids)
    _charge(db, order["user_id"], payment_method_id, difference, "the price difference")
    order = db.edit("orders", order_id)
    if difference != 0:
        kind = "payment" if difference > 0 else "refund"
        order["payment_history"].append(
            {"transaction_type": kind, "amount": abs(difference), "payment_method_id": payment_method_id}
        )
        _adjust_gift_card(db, order["user_id"], payment_method_id, -difference)
    unchanged = list(range(len(order["items"])))
    for old_id, variant in zip(item_ids, variants, strict=True):
        position = next(i for i in unchanged if order["items"][i]["item_id"] == old_id)
        unchanged.remove(position)  # duplicates: each listed id takes the next matching line
        item = order["items"][position]
        item.update(item_id=variant["item_id"], price=variant["price"], options=dict(variant["options"]))
    order["status"] = "pending (item modified)"
    return dump(order)


def modify_pending_order_payment(db: Database, order_id: str, payment_method_id: str) -> str:
    order = _order(db, order_id)
    _require_status(order, "pending", "modified")
    _payment_method(db, order["user_id"], payment_method_id)
    payments = order["payment_history"]
    if len(payments) != 1 or payments[0]["transaction_type"] != "payment":
        raise ToolError("there should be exactly one payment for a pending order")
    old_method, amount = payments[0]["payment_method_id"], payments[0]["amount"]
    if old_method == payment_method_id:
        raise ToolError("the new payment method should be different from the current one")
    _charge(db, order["user_id"], payment_method_id, amount, "the order")
    order = db.edit("orders", order_id)
    order["payment_history"].extend(
        [
            {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
            {"transaction_type": "refund", "amount": amount, "payment_method_id": old_method},
        ]
    )
    _adjust_gift_card(db, order["user_id"], payment_method_id, -amount)
    _adjust_gift_card(db, order["user_id"], old_method, amount)
    return dump(order)


def modify_user_address(
    db: Database, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> str:
    _user(db, user_id)
    user = db.edit("users", user_id)
    user["address"] = _address(address1, address2, city, state, country, zip)
    return dump(user)


def return_delivered_order_items(
    db: Database, order_id: str, item_ids: list[str], payment_method_id: str
) -> str:
    order = _order(db, order_id)
    _require_status(order, "delivered", "returned")
    method = _payment_method(db, order["user_id"], payment_method_id)
    original = order["payment_history"][0]["payment_method_id"] if order["payment_history"] else None
    if method["source"] != "gift_card" and payment_method_id != original:
        raise ToolError("payment method should be either the original payment method or a gift card")
    _check_items_in_order(order, item_ids)
    order = db.edit("orders", order_id)
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return dump(order)


def exchange_delivered_order_items(
    db: Database, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> str:
    order = _order(db, order_id)
    _require_status(order, "delivered", "exchanged")
    difference, _ = _price_difference(db, order, item_ids, new_item_ids)
    _charge(db, order["user_id"], payment_method_id, difference, "the price difference")
    order = db.edit("orders", order_id)
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = difference
    return dump(order)


def _address(address1, address2, city, state, country, zip) -> dict[str, str]:
    return {
        "address1": address1,
        "address2": address2,
        "city": city,
        "country": country,
        "state": state,
        "zip": zip,
    }


TOOLS: dict[str, Tool] = {
    **COMMON_TOOLS,
    "find_user_id_by_email": find_user_id_by_email,
    "find_user_id_by_name_zip": find_user_id_by_name_zip,
    "get_order_details": get_order_details,
    "get_product_details": get_product_details,
    "get_user_details": get_user_details,
    "list_all_product_types": list_all_product_types,
    "cancel_pending_order": cancel_pending_order,
    "modify_pending_order_address": modify_pending_order_address,
    "modify_pending_order_items": modify_pending_order_items,
    "modify_pending_order_payment": modify_pending_order_payment,
    "modify_user_address": modify_user_address,
    "return_delivered_order_items": return_delivered_order_items,
    "exchange_delivered_order_items": exchange_delivered_order_items,
}

# What each write tool may change (table.field); used for the catalogue's state_fields.
WRITES: dict[str, tuple[str, ...]] = {
    "cancel_pending_order": ("orders.status", "orders.payment_history", "users.payment_methods"),
    "modify_pending_order_address": ("orders.address",),
    "modify_pending_order_items": (
        "orders.items",
        "orders.status",
        "orders.payment_history",
        "users.payment_methods",
    ),
    "modify_pending_order_payment": ("orders.payment_history", "users.payment_methods"),
    "modify_user_address": ("users.address",),
    "return_delivered_order_items": ("orders.status", "orders.return_items"),
    "exchange_delivered_order_items": ("orders.status", "orders.exchange_items"),
}
