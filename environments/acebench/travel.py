"""The travel scenario of ACEBench: users, flights and reservations.

Behaviour is written in this project from the tools' descriptions and the benchmark's ground-truth
end states (ACEBench, Chen et al. 2025, MIT licence). Facts the ground truth pins down:

- a booking costs the cabin's fare plus 50 per checked bag beyond the free allowance, which depends
  on membership and cabin (regular 1 / 2, silver 2 / 3, gold 3 / 3 for economy / business), and is
  paid from the chosen balance (``cash`` or ``bank``); the new reservation is ``res_<n>`` and records
  ``reservation_id, user_id, flight_no, payment_method, cabin, baggage``;
- changing to another flight of the same route costs nothing; changing cabin charges (or refunds, to
  the payment method) the fare difference between the cabins *of the reservation's flight before the
  change*; added bags pay 50 each for the bags that go beyond the allowance.

Choices of this project where the ground truth is silent: a modification is all-or-nothing (nothing
changes when the balance cannot pay it) and moves the seat to the new flight; a cancellation removes the reservation, frees the seat and
refunds the fare to the payment method (in full when the airline cancelled or departure is more than
24 hours away, else less a 10% fee); the scenario's clock is 2024-07-14 06:00. Flight numbers are
not unique in the data (``CZ1765`` flies on two days): a flight number means its first available
flight, as in the benchmark.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from environments.acebench.errors import ToolError

CABINS = {"Economy Class": "economy_price", "Business Class": "business_price"}
PAYMENT_METHODS = ("cash", "bank")
FREE_BAGS = {
    "regular": {"Economy Class": 1, "Business Class": 2},
    "silver": {"Economy Class": 2, "Business Class": 3},
    "gold": {"Economy Class": 3, "Business Class": 3},
}
BAG_FEE = 50
NOW = datetime(2024, 7, 14, 6, 0)
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def _extra_bags(membership: str, cabin: str, bags: int) -> int:
    return max(0, bags - FREE_BAGS.get(membership, {}).get(cabin, 0))


class Travel:
    name = "Travel"
    TOOLS = {
        "get_user_details": "read",
        "get_flight_details": "read",
        "get_reservation_details": "read",
        "find_transfer_flights": "read",
        "reserve_flight": "write",
        "cancel_reservation": "write",
        "modify_flight": "write",
    }

    def __init__(self, state: dict[str, Any]):
        self.data = state["Travel"]

    # -- lookups -------------------------------------------------------------------------------
    def _authenticated(self, user_id: str, password: str) -> dict[str, Any]:
        user = self.data["users"].get(user_id)
        if user is None or user["password"] != password:
            raise ToolError("Incorrect user ID or password.")
        return user

    def _flight(self, flight_no: str) -> dict[str, Any] | None:
        matches = [f for f in self.data["flights"] if f["flight_no"] == flight_no]
        return next((f for f in matches if f["status"] == "available"), matches[0] if matches else None)

    def _user(self, user_id: str) -> dict[str, Any]:
        if user_id not in self.data["users"]:
            raise ToolError(f"No user '{user_id}'.")
        return self.data["users"][user_id]

    def _reservation(self, user_id: str, reservation_id: str) -> dict[str, Any]:
        for reservation in self.data["reservations"]:
            if reservation["reservation_id"] == reservation_id and reservation["user_id"] == user_id:
                return reservation
        raise ToolError(f"No reservation '{reservation_id}' for user '{user_id}'.")

    @staticmethod
    def _check_cabin(cabin: str) -> None:
        if cabin not in CABINS:
            raise ToolError(f"Unknown cabin '{cabin}'; choose one of {', '.join(CABINS)}.")

    @staticmethod
    def _check_payment(method: str) -> None:
        if method not in PAYMENT_METHODS:
            raise ToolError(f"Unknown payment method '{method}'; choose 'cash' or 'bank'.")

    @staticmethod
    def _pay(user: dict[str, Any], method: str, amount: float) -> None:
        """Move ``amount`` out of (negative: into) the user's ``method`` balance."""
        key = f"{method}_balance"
        if amount > user[key]:
            raise ToolError(f"Insufficient {method} balance: {amount} is due, {user[key]} is available.")
        user[key] -= amount

    # -- reads ---------------------------------------------------------------------------------
    def get_user_details(self, user_id: str, password: str) -> dict[str, Any]:
        user = self._authenticated(user_id, password)
        return {"user_id": user_id, **{k: v for k, v in user.items() if k != "password"}}

    def get_flight_details(self, origin: str | None = None, destination: str | None = None) -> dict[str, Any]:
        flights = [
            f
            for f in self.data["flights"]
            if (not origin or f["origin"] == origin) and (not destination or f["destination"] == destination)
        ]
        return {"status": True, "flights": flights}

    def get_reservation_details(
        self, reservation_id: str | None = None, user_id: str | None = None
    ) -> dict[str, Any]:
        if not reservation_id and not user_id:
            raise ToolError("Give a reservation_id or a user_id.")
        found = [
            {**r, "flight_info": self._flight(r["flight_no"])}
            for r in self.data["reservations"]
            if (not reservation_id or r["reservation_id"] == reservation_id)
            and (not user_id or r["user_id"] == user_id)
        ]
        return {"status": True, "reservations": found}

    def find_transfer_flights(
        self, origin_city: str, transfer_city: str, destination_city: str
    ) -> dict[str, Any]:
        available = [f for f in self.data["flights"] if f["status"] == "available"]
        first_legs = [
            f for f in available if f["origin"] == origin_city and f["destination"] == transfer_city
        ]
        second_legs = [
            f for f in available if f["origin"] == transfer_city and f["destination"] == destination_city
        ]
        pairs = [
            {"first_leg": a, "second_leg": b}
            for a in first_legs
            for b in second_legs
            if datetime.strptime(a["arrival_time"], _TIME_FORMAT)
            < datetime.strptime(b["depart_time"], _TIME_FORMAT)
        ]
        return {"status": True, "transfer_flights": pairs}

    # -- writes --------------------------------------------------------------------------------
    def reserve_flight(
        self, user_id: str, password: str, flight_no: str, cabin: str, payment_method: str, baggage_count: int
    ) -> dict[str, Any]:
        user = self._authenticated(user_id, password)
        flight = self._flight(flight_no)
        if flight is None or flight["status"] != "available" or flight["seats_available"] <= 0:
            raise ToolError(f"Flight '{flight_no}' does not exist or has no seats available.")
        self._check_cabin(cabin)
        self._check_payment(payment_method)
        if baggage_count < 0:
            raise ToolError("baggage_count cannot be negative.")
        total = flight[CABINS[cabin]] + BAG_FEE * _extra_bags(user["membership_level"], cabin, baggage_count)
        self._pay(user, payment_method, total)
        flight["seats_available"] -= 1
        numbers = [int(r["reservation_id"].removeprefix("res_")) for r in self.data["reservations"]]
        reservation_id = f"res_{max(numbers, default=0) + 1}"
        self.data["reservations"].append(
            {
                "reservation_id": reservation_id,
                "user_id": user_id,
                "flight_no": flight_no,
                "payment_method": payment_method,
                "cabin": cabin,
                "baggage": baggage_count,
            }
        )
        return {"status": True, "reservation_id": reservation_id, "total_cost": total}

    def modify_flight(
        self,
        user_id: str,
        reservation_id: str,
        new_flight_no: str | None = None,
        new_cabin: str | None = None,
        add_baggage: int = 0,
        new_payment_method: str | None = None,
    ) -> dict[str, Any]:
        reservation = self._reservation(user_id, reservation_id)
        user = self._user(user_id)
        method = new_payment_method or reservation["payment_method"]
        self._check_payment(method)
        current = self._flight(reservation["flight_no"])
        if current is None:
            raise ToolError(f"The reservation's flight '{reservation['flight_no']}' no longer exists.")
        if add_baggage < 0:
            raise ToolError("add_baggage cannot be negative.")
        target = current
        if new_flight_no and new_flight_no != reservation["flight_no"]:
            target = self._flight(new_flight_no)
            route = (current["origin"], current["destination"])
            if target is None or (target["origin"], target["destination"]) != route:
                raise ToolError(f"Flight '{new_flight_no}' does not fly {route[0]} -> {route[1]}.")
            if target["seats_available"] <= 0:
                raise ToolError(f"Flight '{new_flight_no}' has no seats available.")
        cabin, due = reservation["cabin"], 0.0
        if new_cabin and new_cabin != cabin:
            self._check_cabin(new_cabin)
            # Observed in the ground truth: the fare difference of the flight booked before the change.
            due += current[CABINS[new_cabin]] - current[CABINS.get(cabin, CABINS[new_cabin])]
            cabin = new_cabin
        bags = reservation["baggage"] + add_baggage
        if add_baggage:
            membership = user["membership_level"]
            due += BAG_FEE * (
                _extra_bags(membership, cabin, bags) - _extra_bags(membership, cabin, reservation["baggage"])
            )
        self._pay(user, method, due)
        if target is not current:  # the seat moves with the passenger
            current["seats_available"] += 1
            target["seats_available"] -= 1
        reservation.update(flight_no=target["flight_no"], cabin=cabin, baggage=bags)
        return {"status": True, "reservation": reservation, "amount_charged": due}

    def cancel_reservation(self, user_id: str, reservation_id: str, reason: str) -> dict[str, Any]:
        reservation = self._reservation(user_id, reservation_id)
        flight = self._flight(reservation["flight_no"])
        if flight is None:
            raise ToolError(f"The reservation's flight '{reservation['flight_no']}' no longer exists.")
        departure = datetime.strptime(flight["depart_time"], _TIME_FORMAT)
        if departure <= NOW:
            raise ToolError("The flight has already departed; it cannot be cancelled.")
        fare = flight[CABINS.get(reservation["cabin"], "economy_price")]
        airline_cancelled = "airline" in reason.lower()
        fee = 0.0 if airline_cancelled or departure - NOW > timedelta(days=1) else round(fare * 0.1, 2)
        self._pay(self._user(user_id), reservation["payment_method"], -(fare - fee))
        self.data["reservations"].remove(reservation)
        flight["seats_available"] += 1
        return {"status": True, "refund": fare - fee, "cancellation_fee": fee}
