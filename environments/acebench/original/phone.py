"""The phone scenario as the original ACEBench behaves (observed by running it, @e6db74b).

Written in this project from recorded behaviour (``tests/data/acebench_original``), not copied. What
the original does that a careful re-implementation would not:

- every phone class (``MessageApi``, ``ReminderApi``, ``FoodPlatform``) carries its own ``wifi`` /
  ``logged_in`` flags and the device methods (``turn_on_wifi``, ``login_device``); the dispatcher runs
  a device method on every involved class, so the flags stay in step;
- ``logged_in`` defaults to true, ``wifi`` to false; a class's start flags come from its own
  ``initial_config`` entry and then from ``BaseApi``'s, which wins (``FoodPlatform.logged_in_users``
  is reset the same way, from ``BaseApi``'s entry);
- a refusal is a result ``{"status": false, "message": ...}``, never an exception; the messages are the
  original's words;
- a message sent during the episode has no ``time``: the latest / earliest message and the list of
  message times then fail with ``KeyError: 'time'``;
- ``add_reminder`` accepts any time value; the reminder id is the counter (4 after the defaults);
- logging in to the food platform twice is refused ("already logged in"); an order with no items is
  placed with a total of 0.0; ``check_balance`` of an unknown user is 0.0; ``get_products`` returns the
  bare menu list;
- message and reminder ids are integers (``delete_message("4")`` finds nothing).

Method and parameter names are the original's interface: Python's own error text for a bad call
(``MessageApi.send_message() got an unexpected keyword argument 'x'``) is then the same.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any


def _int_keys(table: dict[Any, Any]) -> dict[Any, Any]:
    """The data files spell integer ids as JSON strings; the original keys its tables by int."""
    return {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in table.items()}


def _refused(message: str) -> dict[str, Any]:
    return {"status": False, "message": message}


class BaseApi:
    """The device. Its state is two flags; subclasses are the apps that read them."""

    SAVED = ("wifi", "logged_in")

    def __init__(self, defaults: dict[str, Any]):
        self.wifi = False
        self.logged_in = True

    def _configure(self, config: dict[str, Any]) -> None:
        self.wifi = config.get("wifi", False)
        self.logged_in = config.get("logged_in", True)

    def turn_on_wifi(self):
        self.wifi = True
        return {"status": True, "message": "Wi-Fi has been turned on"}

    def login_device(self):
        self.logged_in = True
        return {"status": True, "message": "Device has been logged in"}


class MessageApi(BaseApi):
    SAVED = ("inbox",)

    def __init__(self, defaults: dict[str, Any]):
        super().__init__(defaults)
        self.max_capacity = defaults["max_capacity"]
        self.user_list = defaults["user_list"]
        self.inbox = _int_keys(defaults["inbox"])
        self.message_id_counter = defaults["message_id_counter"]

    def send_message(self, sender_name, receiver_name, message):
        if self.logged_in == False:  # noqa: E712 - the original compares with False, not truthiness
            return _refused("Device not logged in, unable to send message")
        if self.wifi == False:  # noqa: E712
            return _refused("Wi-Fi is turned off, cannot send messages at this time")
        if len(self.inbox) >= self.max_capacity:
            return _refused("Inbox capacity is full. You need to ask the user which message to delete.")
        if sender_name not in self.user_list or receiver_name not in self.user_list:
            return _refused("Sender or receiver does not exist")
        self.message_id_counter += 1
        self.inbox[self.message_id_counter] = {
            "sender_id": self.user_list[sender_name]["user_id"],
            "receiver_id": self.user_list[receiver_name]["user_id"],
            "message": message,
        }
        return {"status": True, "message": f"Message successfully sent to {receiver_name}."}

    def delete_message(self, message_id):
        if self.logged_in == False:  # noqa: E712
            return _refused("Device not logged in, unable to delete message")
        if message_id not in self.inbox:
            return _refused("Message ID does not exist")
        del self.inbox[message_id]
        return {"status": True, "message": f"Message ID {message_id} has been successfully deleted."}

    def view_messages_between_users(self, sender_name, receiver_name):
        if self.logged_in == False:  # noqa: E712
            return _refused("Device not logged in, unable to view message information")
        if sender_name not in self.user_list:
            return _refused("Sender does not exist")
        if receiver_name not in self.user_list:
            return _refused("Receiver does not exist")
        sender_id = self.user_list[sender_name]["user_id"]
        receiver_id = self.user_list[receiver_name]["user_id"]
        found = [
            {"id": key, "sender": sender_name, "receiver": receiver_name, "message": entry["message"]}
            for key, entry in self.inbox.items()
            if entry["sender_id"] == sender_id and entry["receiver_id"] == receiver_id
        ]
        return {"status": True, "messages": found} if found else _refused("No related message records found")

    def search_messages(self, user_name, keyword):
        if user_name not in self.user_list:
            return _refused("User does not exist")
        user_id = self.user_list[user_name]["user_id"]
        found = []
        for key, entry in self.inbox.items():
            # Same order of tests as the original: the keyword is read only for the user's messages.
            if (
                user_id in (entry["sender_id"], entry["receiver_id"])
                and keyword.lower() in entry["message"].lower()
            ):
                found.append(
                    {
                        "id": key,
                        "sender_id": entry["sender_id"],
                        "receiver_id": entry["receiver_id"],
                        "message": entry["message"],
                    }
                )
        return (
            {"status": True, "messages": found}
            if found
            else _refused("No messages found containing the keyword")
        )

    def get_all_message_times_with_ids(self):
        if self.logged_in == False:  # noqa: E712
            return _refused(
                "Device not logged in, unable to retrieve all message times and their corresponding message IDs."
            )
        return {key: entry["time"] for key, entry in self.inbox.items()}

    def _extreme_message_id(self, later: bool) -> Any:
        best_id, best_time = None, None
        for key, entry in self.inbox.items():
            when = datetime.strptime(entry["time"], "%Y-%m-%d")  # KeyError for a message sent here
            if best_time is None or (when > best_time if later else when < best_time):
                best_id, best_time = key, when
        return best_id

    def get_latest_message_id(self):
        if self.logged_in == False:  # noqa: E712
            return _refused("Device not logged in, unable to retrieve the latest sent message ID.")
        if not self.inbox:
            return _refused("No message records found")
        found = self._extreme_message_id(later=True)
        return {"status": True, "message": f"The latest message ID is {found}", "message_id": found}

    def get_earliest_message_id(self):
        if self.logged_in == False:  # noqa: E712
            return _refused("Device not logged in, unable to retrieve the earliest sent message ID.")
        if not self.inbox:
            return _refused("No message records found")
        found = self._extreme_message_id(later=False)
        return {"status": True, "message": f"The earliest message ID is {found}", "message_id": found}


class ReminderApi(BaseApi):
    SAVED = ("reminder_list",)

    def __init__(self, defaults: dict[str, Any]):
        super().__init__(defaults)
        self.max_capacity = defaults["max_capacity"]
        self.reminder_list = _int_keys(defaults["reminder_list"])
        self.reminder_id_counter = defaults["reminder_id_counter"]

    def view_reminder_by_title(self, title):
        if self.logged_in == False:  # noqa: E712
            return _refused("The device is not logged in, so you cannot view notifications")
        for reminder in self.reminder_list.values():
            if reminder["title"] == title:
                return {"status": True, "reminder": reminder}
        return _refused(f"No reminder found with the title '{title}'.")

    def add_reminder(self, title, description, time):
        if self.logged_in == False:  # noqa: E712
            return _refused("Device not logged in. Unable to add a new reminder.")
        if len(self.reminder_list) >= self.max_capacity:
            return _refused("Reminder capacity is full. Unable to add a new reminder.")
        self.reminder_id_counter += 1
        self.reminder_list[self.reminder_id_counter] = {
            "reminder_id": self.reminder_id_counter,
            "title": title,
            "description": description,
            "time": time,
            "notified": False,
        }
        return {"status": True, "message": f"Reminder '{title}' was successfully added."}

    def delete_reminder(self, reminder_id):
        if self.logged_in == False:  # noqa: E712
            return _refused("Device not logged in. Unable to delete the specified reminder.")
        if reminder_id not in self.reminder_list:
            return _refused("Reminder ID does not exist.")
        del self.reminder_list[reminder_id]
        return {"status": True, "message": f"Reminder ID {reminder_id} was successfully deleted."}

    def view_all_reminders(self):
        if not self.reminder_list:
            return _refused("No reminders found.")
        fields = ("title", "description", "time", "notified")
        return {"status": True, "reminders": [{f: r[f] for f in fields} for r in self.reminder_list.values()]}


class FoodPlatform(BaseApi):
    SAVED = ("users", "logged_in_users", "orders")

    def __init__(self, defaults: dict[str, Any]):
        super().__init__(defaults)
        self.users = defaults["users"]
        self.merchant_list = defaults["merchant_list"]
        self.logged_in_users = defaults["logged_in_users"]
        self.orders = defaults["orders"]

    def _configure(self, config: dict[str, Any]) -> None:
        super()._configure(config)
        self.logged_in_users = copy.deepcopy(config.get("logged_in_users", []))

    def login_food_platform(self, username, password):
        if self.wifi == False:  # noqa: E712
            return _refused("Wi-Fi is not enabled, unable to login")
        if username not in self.users:
            return _refused("User does not exist")
        if self.users[username]["password"] != password:
            return _refused("Incorrect password")
        if username in self.logged_in_users:
            return _refused(f"{username} is already logged in")
        self.logged_in_users.append(username)
        return {"status": True, "message": f"User {username} has successfully logged in!"}

    def view_logged_in_users(self):
        if not self.logged_in_users:
            return _refused("No users are currently logged in to the food platform")
        return {"status": True, "logged_in_users": self.logged_in_users}

    def check_balance(self, user_name):
        return self.users[user_name]["balance"] if user_name in self.users else 0.0

    def add_food_delivery_order(self, username, merchant_name, items):
        if username not in self.logged_in_users:
            return _refused(f"User {username} is not logged in to the food platform")
        if merchant_name not in self.merchant_list:
            return _refused("Merchant does not exist")
        menu = self.merchant_list[merchant_name]["menu"]
        total_price, lines = 0.0, []
        for item in items:
            product, quantity = item.get("product"), item.get("quantity", 1)
            if not isinstance(quantity, int) or quantity <= 0:
                return _refused(f"Invalid quantity {quantity} for product {product}")
            entry = next((e for e in menu if e["product"] == product), None)
            if entry is None:
                return _refused(f"Product {product} does not exist in {merchant_name}'s menu")
            total_price += entry["price"] * quantity
            lines.append({"product": product, "quantity": quantity, "price_per_unit": entry["price"]})
        if total_price > self.users[username]["balance"]:
            return _refused("Insufficient balance to place the order")
        self.users[username]["balance"] -= total_price
        self.orders.append(
            {
                "user_name": username,
                "merchant_name": merchant_name,
                "items": lines,
                "total_price": total_price,
            }
        )
        return {
            "status": True,
            "message": f"Food delivery order successfully placed with {merchant_name}. Total amount: {total_price} yuan",
        }

    def get_products(self, merchant_name):
        merchant = self.merchant_list.get(merchant_name)
        return merchant["menu"] if merchant else _refused(f"Merchant '{merchant_name}' does not exist")

    def view_orders(self, user_name):
        found = [order for order in self.orders if order["user_name"] == user_name]
        return {"status": True, "orders": found} if found else _refused("User has no order records")

    def search_orders(self, keyword):
        found = [
            order
            for order in self.orders
            if keyword.lower() in order["merchant_name"].lower()
            or any(keyword.lower() in item["product"].lower() for item in order.get("items", []))
        ]
        return {"status": True, "orders": found} if found else _refused("No matching orders found")
