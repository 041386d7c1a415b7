"""The phone scenario of ACEBench: device (``BaseApi``), messages, reminders and a food platform.

Behaviour is written in this project from the tools' documented descriptions and from what the
benchmark's ground-truth end states show (ACEBench, Chen et al. 2025, data under MIT licence):

- one device per rollout: ``BaseApi``'s ``wifi`` / ``logged_in`` flags gate the other phone classes;
  reading or changing messages and reminders needs a logged-in device, sending a message and logging
  in to the food platform also need Wi-Fi;
- a new message / reminder takes the next id from its counter (message ``7`` after six defaults,
  reminder ``4`` with ``reminder_id`` 4); a sent message records no time;
- "latest" / "earliest" message means by the message's date; a message sent during the episode has
  no date and counts as the newest;
- an inbox or reminder list at ``max_capacity`` refuses new entries until one is deleted;
- a food order lists ``{product, quantity, price_per_unit}`` per item and ``total_price``, and is paid
  from the user's platform balance; the user must be logged in to the platform.

State is a JSON-like dict per class (``state["MessageApi"]["inbox"]["7"]``), owned by one rollout.
"""

from __future__ import annotations

import re
from typing import Any

from environments.acebench.errors import ToolError

_REMINDER_TIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$")


class BaseApi:
    TOOLS = {"turn_on_wifi": "write", "login_device": "write"}

    def __init__(self, state: dict[str, Any]):
        self.device = state["BaseApi"]

    def turn_on_wifi(self) -> dict[str, Any]:
        self.device["wifi"] = True
        return {"status": True, "message": "Wi-Fi is on."}

    def login_device(self) -> dict[str, Any]:
        self.device["logged_in"] = True
        return {"status": True, "message": "The device is logged in."}


class _OnDevice:
    """A phone app: reads the shared device flags."""

    name = ""

    def __init__(self, state: dict[str, Any]):
        self.device = state["BaseApi"]
        self.data = state[self.name]

    def _require_login(self, action: str) -> None:
        if not self.device.get("logged_in"):
            raise ToolError(f"The device is not logged in; log in to the device to {action}.")

    def _require_wifi(self, action: str) -> None:
        if not self.device.get("wifi"):
            raise ToolError(f"Wi-Fi is off; turn on Wi-Fi to {action}.")


class MessageApi(_OnDevice):
    name = "MessageApi"
    TOOLS = {
        "send_message": "write",
        "delete_message": "write",
        "view_messages_between_users": "read",
        "search_messages": "read",
        "get_latest_message_id": "read",
        "get_earliest_message_id": "read",
    }

    def _user_id(self, name: str, role: str) -> str:
        users = self.data["user_list"]
        if name not in users:
            raise ToolError(f"{role} '{name}' is not a known user; known users: {', '.join(users)}.")
        return users[name]["user_id"]

    def _names_by_id(self) -> dict[str, str]:
        return {user["user_id"]: name for name, user in self.data["user_list"].items()}

    def send_message(self, sender_name: str, receiver_name: str, message: str) -> dict[str, Any]:
        self._require_login("send messages")
        self._require_wifi("send messages")
        inbox = self.data["inbox"]
        if len(inbox) >= self.data["max_capacity"]:
            raise ToolError(
                f"The inbox is full ({len(inbox)} of {self.data['max_capacity']} messages); "
                "delete a message before sending."
            )
        sender_id = self._user_id(sender_name, "Sender")
        receiver_id = self._user_id(receiver_name, "Receiver")
        self.data["message_id_counter"] += 1
        message_id = self.data["message_id_counter"]
        inbox[str(message_id)] = {"sender_id": sender_id, "receiver_id": receiver_id, "message": message}
        return {"status": True, "message": f"Message sent to {receiver_name}.", "message_id": message_id}

    def delete_message(self, message_id: int) -> dict[str, Any]:
        self._require_login("delete messages")
        inbox = self.data["inbox"]
        if str(message_id) not in inbox:
            raise ToolError(f"No message with id {message_id}.")
        del inbox[str(message_id)]
        return {"status": True, "message": f"Message {message_id} deleted."}

    def view_messages_between_users(self, sender_name: str, receiver_name: str) -> dict[str, Any]:
        self._require_login("view messages")
        sender_id = self._user_id(sender_name, "Sender")
        receiver_id = self._user_id(receiver_name, "Receiver")
        found = [
            {"id": int(key), "sender": sender_name, "receiver": receiver_name, "message": msg["message"]}
            for key, msg in self.data["inbox"].items()
            if msg["sender_id"] == sender_id and msg["receiver_id"] == receiver_id
        ]
        return {"status": True, "messages": found}

    def search_messages(self, user_name: str, keyword: str) -> dict[str, Any]:
        user_id = self._user_id(user_name, "User")
        names = self._names_by_id()
        found = [
            {
                "id": int(key),
                "sender": names.get(msg["sender_id"], msg["sender_id"]),
                "receiver": names.get(msg["receiver_id"], msg["receiver_id"]),
                "message": msg["message"],
            }
            for key, msg in self.data["inbox"].items()
            if user_id in (msg["sender_id"], msg["receiver_id"]) and keyword.lower() in msg["message"].lower()
        ]
        return {"status": True, "messages": found}

    def _by_date(self) -> list[tuple[str, int]]:
        # Undated messages were sent during this episode: they sort after every dated one.
        return sorted((msg.get("time") or "9999-99-99", int(key)) for key, msg in self.data["inbox"].items())

    def get_latest_message_id(self) -> dict[str, Any]:
        self._require_login("read messages")
        ordered = self._by_date()
        if not ordered:
            raise ToolError("The inbox is empty.")
        return {"status": True, "message_id": ordered[-1][1]}

    def get_earliest_message_id(self) -> dict[str, Any]:
        self._require_login("read messages")
        ordered = self._by_date()
        if not ordered:
            raise ToolError("The inbox is empty.")
        return {"status": True, "message_id": ordered[0][1]}


class ReminderApi(_OnDevice):
    name = "ReminderApi"
    TOOLS = {"view_reminder_by_title": "read", "add_reminder": "write", "search_reminders": "read"}

    def view_reminder_by_title(self, title: str) -> dict[str, Any]:
        self._require_login("view reminders")
        for reminder in self.data["reminder_list"].values():
            if reminder["title"] == title:
                return {"status": True, "reminder": reminder}
        raise ToolError(f"No reminder titled '{title}'.")

    def add_reminder(self, title: str, description: str, time: str) -> dict[str, Any]:
        self._require_login("add reminders")
        reminders = self.data["reminder_list"]
        if len(reminders) >= self.data["max_capacity"]:
            raise ToolError(f"The reminder list is full ({len(reminders)} reminders).")
        if not _REMINDER_TIME.match(time):
            raise ToolError(f"time must look like YYYY-MM-DD HH:MM, got '{time}'.")
        self.data["reminder_id_counter"] += 1
        reminder_id = self.data["reminder_id_counter"]
        reminders[str(reminder_id)] = {
            "reminder_id": reminder_id,
            "title": title,
            "description": description,
            "time": time,
            "notified": False,
        }
        return {"status": True, "message": f"Reminder '{title}' added.", "reminder_id": reminder_id}

    def search_reminders(self, keyword: str) -> dict[str, Any]:
        self._require_login("search reminders")
        needle = keyword.lower()
        found = [
            r
            for r in self.data["reminder_list"].values()
            if needle in r["title"].lower() or needle in r["description"].lower()
        ]
        return {"status": True, "reminders": found}


class FoodPlatform(_OnDevice):
    name = "FoodPlatform"
    TOOLS = {
        "login_food_platform": "write",
        "check_balance": "read",
        "get_products": "read",
        "add_food_delivery_order": "write",
    }

    def _user(self, name: str) -> dict[str, Any]:
        if name not in self.data["users"]:
            raise ToolError(f"'{name}' has no food platform account.")
        return self.data["users"][name]

    def _menu(self, merchant_name: str) -> list[dict[str, Any]]:
        merchants = self.data["merchant_list"]
        if merchant_name not in merchants:
            raise ToolError(f"No merchant '{merchant_name}'; merchants: {', '.join(merchants)}.")
        return merchants[merchant_name]["menu"]

    def login_food_platform(self, username: str, password: str) -> dict[str, Any]:
        self._require_wifi("log in to the food platform")
        if self._user(username)["password"] != password:
            raise ToolError("Wrong password.")
        if username in self.data["logged_in_users"]:
            return {"status": True, "message": f"{username} is already logged in."}
        self.data["logged_in_users"].append(username)
        return {"status": True, "message": f"{username} logged in to the food platform."}

    def check_balance(self, user_name: str) -> dict[str, Any]:
        return {"status": True, "balance": self._user(user_name)["balance"]}

    def get_products(self, merchant_name: str) -> dict[str, Any]:
        return {"status": True, "merchant": merchant_name, "menu": self._menu(merchant_name)}

    def add_food_delivery_order(
        self, username: str, merchant_name: str, items: list[dict[str, Any]]
    ) -> dict[str, Any]:
        user = self._user(username)
        if username not in self.data["logged_in_users"]:
            raise ToolError(f"{username} is not logged in to the food platform.")
        prices = {entry["product"]: entry["price"] for entry in self._menu(merchant_name)}
        if not items:
            raise ToolError("An order needs at least one item.")
        lines, total = [], 0.0
        for item in items:
            product, quantity = item["product"], item["quantity"]
            if product not in prices:
                raise ToolError(f"'{product}' is not on {merchant_name}'s menu: {', '.join(prices)}.")
            if quantity <= 0:
                raise ToolError(f"Quantity of '{product}' must be positive, got {quantity}.")
            lines.append({"product": product, "quantity": quantity, "price_per_unit": prices[product]})
            total += prices[product] * quantity
        if total > user["balance"]:
            raise ToolError(
                f"Insufficient balance: the order costs {total}, the balance is {user['balance']}."
            )
        user["balance"] -= total
        self.data["orders"].append(
            {"user_name": username, "merchant_name": merchant_name, "items": lines, "total_price": total}
        )
        return {"status": True, "message": f"Order placed with {merchant_name}.", "total_price": total}
