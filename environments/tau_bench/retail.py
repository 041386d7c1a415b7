"""Retail domain tools with tau-bench's own semantics (the default; ``semantics: original``).

Written from the observed behaviour of sierra-research/tau-bench@59a200c (recorded outputs in
``tests/environments/data``), not from its code. Each tool does what the original does, including
what ``policy.md`` forbids but the original accepts, and fails the same way: a rejected call returns
``"Error: ..."`` in the original's words, and a call the original does not anticipate (a list where
a string belongs, an order without payments) raises the Python exception the original's steps raise,
which :func:`toolkit.execute_original` reports as ``Error: <exception>``. Arguments are not
type-checked. Money quirks kept: cancelling refunds *every* payment-history entry (refunds too, after
a payment change); changing items always appends a payment-history entry (a refund of 0 when the
price does not change) with the unrounded difference; gift-card balances are rounded to cents.
"""

from __future__ import annotations

from typing import Any

from environments.tau_bench.db import Database
from environments.tau_bench.toolkit import ORIGINAL_COMMON_TOOLS, Tool, dump

TABLES = ("users", "orders", "products")


def _gift_card(db: Database, user_id: str, method_id: str) -> dict[str, Any]:
    """The user's payment method, made private to this rollout so that its balance can change."""
    return db.edit("users", user_id)["payment_methods"][method_id]


def _lines(order: dict[str, Any], item_ids: list) -> str | None:
    """The original's multiset check: each listed id at most as often as the order holds it."""
    held = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > held.count(item_id):
            return item_id
    return None


def _difference(products, order, item_ids, new_item_ids) -> tuple[Any, str | None]:
    """Sum of new minus old prices, pairing each old id with the first order line holding it."""
    difference = 0
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):  # lengths checked
        item = [line for line in order["items"] if line["item_id"] == item_id][0]
        variants = products[item["product_id"]]["variants"]
        if not (new_item_id in variants and variants[new_item_id]["available"]):
            return None, f"Error: new item {new_item_id} not found or available"
        difference += variants[new_item_id]["price"] - item["price"]
    return difference, None


# --- read tools -----------------------------------------------------------------------------------


def find_user_id_by_email(db: Database, email: str) -> str:
    for user_id, user in db.tables["users"].items():
        if user["email"].lower() == email.lower():
            return user_id
    return "Error: user not found"


def find_user_id_by_name_zip(db: Database, first_name: str, last_name: str, zip: str) -> str:
    for user_id, user in db.tables["users"].items():
        name = user["name"]
        if (
            name["first_name"].lower() == first_name.lower()
            and name["last_name"].lower() == last_name.lower()
            and user["address"]["zip"] == zip
        ):
            return user_id
    return "Error: user not found"


def get_order_details(db: Database, order_id: str) -> str:
    orders = db.tables["orders"]
    return dump(orders[order_id]) if order_id in orders else "Error: order not found"


def get_product_details(db: Database, product_id: str) -> str:
    products = db.tables["products"]
    return dump(products[product_id]) if product_id in products else "Error: product not found"


def get_user_details(db: Database, user_id: str) -> str:
    users = db.tables["users"]
    return dump(users[user_id]) if user_id in users else "Error: user not found"


def list_all_product_types(db: Database) -> str:
    names = {product["name"]: product["product_id"] for product in db.tables["products"].values()}
    return dump(dict(sorted(names.items())))


# --- write tools ----------------------------------------------------------------------------------


def cancel_pending_order(db: Database, order_id: str, reason: str) -> str:
    orders = db.tables["orders"]
    if order_id not in orders:
        return "Error: order not found"
    if orders[order_id]["status"] != "pending":
        return "Error: non-pending order cannot be cancelled"
    if reason not in ("no longer needed", "ordered by mistake"):
        return "Error: invalid reason"
    order = db.edit("orders", order_id)
    refunds = []
    for entry in order["payment_history"]:  # every entry, refunds included
        method_id = entry["payment_method_id"]
        refunds.append(
            {"transaction_type": "refund", "amount": entry["amount"], "payment_method_id": method_id}
        )
        if "gift_card" in method_id:  # gift cards are refunded at once
            card = _gift_card(db, order["user_id"], method_id)
            card["balance"] = round(card["balance"] + entry["amount"], 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return dump(order)


def modify_pending_order_address(
    db: Database, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> str:
    orders = db.tables["orders"]
    if order_id not in orders:
        return "Error: order not found"
    if orders[order_id]["status"] != "pending":
        return "Error: non-pending order cannot be modified"
    order = db.edit("orders", order_id)
    order["address"] = _address(address1, address2, city, state, country, zip)
    return dump(order)


def modify_pending_order_items(
    db: Database, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> str:
    orders, users = db.tables["orders"], db.tables["users"]
    if order_id not in orders:
        return "Error: order not found"
    order = orders[order_id]
    if order["status"] != "pending":
        return "Error: non-pending order cannot be modified"
    if (missing := _lines(order, item_ids)) is not None:
        return f"Error: {missing} not found"
    if len(item_ids) != len(new_item_ids):
        return "Error: the number of items to be exchanged should match"
    difference, error = _difference(db.tables["products"], order, item_ids, new_item_ids)
    if error:
        return error
    methods = users[order["user_id"]]["payment_methods"]
    if payment_method_id not in methods:
        return "Error: payment method not found"
    method = methods[payment_method_id]
    if method["source"] == "gift_card" and method["balance"] < difference:
        return "Error: insufficient gift card balance to pay for the new item"
    order = db.edit("orders", order_id)
    order["payment_history"].append(
        {
            "transaction_type": "payment" if difference > 0 else "refund",
            "amount": abs(difference),  # not rounded, and recorded even when 0
            "payment_method_id": payment_method_id,
        }
    )
    if method["source"] == "gift_card":
        card = _gift_card(db, order["user_id"], payment_method_id)
        card["balance"] = round(card["balance"] - difference, 2)
    products = db.tables["products"]
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):  # lengths checked
        line = [line for line in order["items"] if line["item_id"] == item_id][0]  # the first match
        variant = products[line["product_id"]]["variants"][new_item_id]
        line["item_id"] = new_item_id
        line["price"] = variant["price"]
        line["options"] = variant["options"]
    order["status"] = "pending (item modified)"
    return dump(order)


def modify_pending_order_payment(db: Database, order_id: str, payment_method_id: str) -> str:
    orders, users = db.tables["orders"], db.tables["users"]
    if order_id not in orders:
        return "Error: order not found"
    order = orders[order_id]
    if order["status"] != "pending":
        return "Error: non-pending order cannot be modified"
    methods = users[order["user_id"]]["payment_methods"]
    if payment_method_id not in methods:
        return "Error: payment method not found"
    history = order["payment_history"]
    if len(history) > 1 or history[0]["transaction_type"] != "payment":
        return "Error: there should be exactly one payment for a pending order"
    old_method_id, amount = history[0]["payment_method_id"], history[0]["amount"]
    if old_method_id == payment_method_id:
        return "Error: the new payment method should be different from the current one"
    method = methods[payment_method_id]
    if method["source"] == "gift_card" and method["balance"] < amount:
        return "Error: insufficient gift card balance to pay for the order"
    order = db.edit("orders", order_id)
    order["payment_history"].extend(
        [
            {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
            {"transaction_type": "refund", "amount": amount, "payment_method_id": old_method_id},
        ]
    )
    if method["source"] == "gift_card":
        card = _gift_card(db, order["user_id"], payment_method_id)
        card["balance"] = round(card["balance"] - amount, 2)
    if "gift_card" in old_method_id:
        card = _gift_card(db, order["user_id"], old_method_id)
        card["balance"] = round(card["balance"] + amount, 2)
    return dump(order)


def modify_user_address(
    db: Database, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> str:
    if user_id not in db.tables["users"]:
        return "Error: user not found"
    user = db.edit("users", user_id)
    user["address"] = _address(address1, address2, city, state, country, zip)
    return dump(user)


def return_delivered_order_items(
    db: Database, order_id: str, item_ids: list[str], payment_method_id: str
) -> str:
    orders, users = db.tables["orders"], db.tables["users"]
    if order_id not in orders:
        return "Error: order not found"
    order = orders[order_id]
    if order["status"] != "delivered":
        return "Error: non-delivered order cannot be returned"
    if payment_method_id not in users[order["user_id"]]["payment_methods"]:
        return "Error: payment method not found"
    if (
        "gift_card" not in payment_method_id
        and payment_method_id != order["payment_history"][0]["payment_method_id"]
    ):
        return "Error: payment method should be either the original payment method or a gift card"
    if _lines(order, item_ids) is not None:
        return "Error: some item not found"
    order = db.edit("orders", order_id)
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return dump(order)


def exchange_delivered_order_items(
    db: Database, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> str:
    orders, users = db.tables["orders"], db.tables["users"]
    if order_id not in orders:
        return "Error: order not found"
    order = orders[order_id]
    if order["status"] != "delivered":
        return "Error: non-delivered order cannot be exchanged"
    if (missing := _lines(order, item_ids)) is not None:
        return f"Error: {missing} not found"
    if len(item_ids) != len(new_item_ids):
        return "Error: the number of items to be exchanged should match"
    difference, error = _difference(db.tables["products"], order, item_ids, new_item_ids)
    if error:
        return error
    difference = round(difference, 2)
    methods = users[order["user_id"]]["payment_methods"]
    if payment_method_id not in methods:
        return "Error: payment method not found"
    method = methods[payment_method_id]
    if method["source"] == "gift_card" and method["balance"] < difference:
        return "Error: insufficient gift card balance to pay for the price difference"
    order = db.edit("orders", order_id)
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = difference
    return dump(order)


def _address(address1, address2, city, state, country, zip) -> dict[str, Any]:
    return {
        "address1": address1,
        "address2": address2,
        "city": city,
        "state": state,
        "country": country,
        "zip": zip,
    }


TOOLS: dict[str, Tool] = {
    **ORIGINAL_COMMON_TOOLS,
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
