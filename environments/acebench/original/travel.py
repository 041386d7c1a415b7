"""The travel scenario as the original ACEBench behaves (observed by running it, @e6db74b).

Written in this project from recorded behaviour, not copied. What the original does:

- results are mostly sentences (``"Booking successful. Reservation ID: res_5. Total cost: 1200 yuan
  (including baggage fees)."``); lookups return lists, which reach the agent as Python text;
- ``initial_config`` is ignored: every task starts from the defaults;
- ``reserve_flight`` checks no seats (``seats_available`` goes below zero), looks the flight up before
  the password (an unknown flight fails with ``'NoneType' object is not subscriptable``, a wrong
  password with ``KeyError: 'membership_level'``), prices any cabin but ``"Economy Class"`` as business
  and then fails on a cabin it has no baggage allowance for (``KeyError: 'First Class'``), refuses a
  payment method other than cash or bank only after that, and numbers the reservation
  ``res_<count + 1>``;
- ``modify_flight`` never moves seats; the new cabin is saved even when its price difference cannot be
  paid; bags are charged for every bag above the allowance *on each call*; a payment method other than
  cash or bank is charged nothing; a flight number means the first flight with that number, whatever
  its status;
- ``cancel_reservation`` refunds the fare (less 10% within 24 hours, unless the reason is exactly
  "The airline has canceled the flight.") to the *cash* balance, keeps the reservation, and refunds
  again when asked again; the clock is 2024-07-14 06:00;
- ``get_reservation_details`` with both ids looks up by ``reservation_id`` alone.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

NOW = datetime(2024, 7, 14, 6, 0, 0)
_TIME = "%Y-%m-%d %H:%M:%S"
FREE_BAGS = {
    "regular": {"Economy Class": 1, "Business Class": 2},
    "silver": {"Economy Class": 2, "Business Class": 3},
    "gold": {"Economy Class": 3, "Business Class": 3},
}
BAG_FEE = 50
AIRLINE_CANCELLED = "The airline has canceled the flight."
_FLIGHT_FIELDS = (
    "flight_no",
    "origin",
    "destination",
    "depart_time",
    "arrival_time",
    "status",
    "seats_available",
    "economy_price",
    "business_price",
)
_WRONG_LOGIN = {"status": "error", "message": "Incorrect username or password."}


class Travel:
    SAVED = ("users", "reservations")

    def __init__(self, defaults: dict[str, Any]):
        self.users = defaults["users"]
        self.flights = defaults["flights"]
        self.reservations = defaults["reservations"]

    def _configure(self, config: dict[str, Any]) -> None:
        """The original's travel scenario takes nothing from ``initial_config``."""

    def _first_flight(self, flight_no: Any, available_only: bool = False) -> dict[str, Any] | None:
        return next(
            (
                f
                for f in self.flights
                if f["flight_no"] == flight_no and (not available_only or f["status"] == "available")
            ),
            None,
        )

    def _reservation(self, reservation_id: Any, user_id: Any) -> dict[str, Any] | None:
        return next(
            (
                r
                for r in self.reservations
                if r["reservation_id"] == reservation_id and r["user_id"] == user_id
            ),
            None,
        )

    # -- lookups ---------------------------------------------------------------------------------------
    def get_flight_details(self, origin=None, destination=None):
        flights = self.flights
        if origin:
            flights = [f for f in flights if f["origin"] == origin]
        if destination:
            flights = [f for f in flights if f["destination"] == destination]
        if not flights:
            return "There are no direct flights that meet the criteria."
        return [{key: f[key] for key in _FLIGHT_FIELDS} for f in flights]

    def get_user_details(self, user_id, password):
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return {key: value for key, value in user.items() if key != "password"}
        return dict(_WRONG_LOGIN)

    def get_reservation_details(self, reservation_id=None, user_id=None):
        if reservation_id:
            found = [r for r in self.reservations if r["reservation_id"] == reservation_id]
        elif user_id:
            found = [r for r in self.reservations if r["user_id"] == user_id]
        else:
            return {"status": "error", "message": "Please provide a valid reservation ID or user ID"}
        return [{**r, "flight_info": self._first_flight(r["flight_no"])} for r in found]

    def authenticate_user(self, user_id, password):
        user = self.users.get(user_id)
        return user if user and user["password"] == password else dict(_WRONG_LOGIN)

    def get_baggage_allowance(self, membership_level, cabin_class):
        return FREE_BAGS.get(membership_level, {}).get(cabin_class, 0)

    def find_transfer_flights(self, origin_city, transfer_city, destination_city):
        available = [f for f in self.flights if f["status"] == "available"]
        first_legs = [
            f for f in available if f["origin"] == origin_city and f["destination"] == transfer_city
        ]
        second_legs = [
            f for f in available if f["origin"] == transfer_city and f["destination"] == destination_city
        ]
        pairs = []
        for first in first_legs:
            arrival = datetime.strptime(first["arrival_time"], _TIME)
            for second in second_legs:
                if arrival < datetime.strptime(second["depart_time"], _TIME):
                    pairs.append({"first_leg": first, "second_leg": second})
        return pairs or "No connecting flights that meet the criteria were found."

    def calculate_baggage_fee(self, membership_level, cabin_class, baggage_count):
        free = FREE_BAGS[membership_level][cabin_class]
        return max(baggage_count - free, 0) * BAG_FEE

    def calculate_price_difference(self, flight, old_cabin, new_cabin):
        prices = {"Economy Class": flight["economy_price"], "Business Class": flight["business_price"]}
        old_price = prices.get(old_cabin, 0)
        return prices.get(new_cabin, 0) - old_price

    # -- money -----------------------------------------------------------------------------------------
    def update_balance(self, user, payment_method, amount):
        """Add ``amount`` (negative: charge) to the method's balance; False when it would go below 0.
        A method other than cash or bank changes nothing and succeeds."""
        if payment_method in ("cash", "bank"):
            key = f"{payment_method}_balance"
            if user[key] + amount < 0:
                return False
            user[key] += amount
        return True

    def process_refund(self, user, amount):
        user["cash_balance"] += amount
        user["user_name"]  # noqa: B018 - the original reads it (to print); a user without a name fails here

    # -- writes ----------------------------------------------------------------------------------------
    def reserve_flight(self, user_id, password, flight_no, cabin, payment_method, baggage_count):
        user = self.authenticate_user(user_id, password)
        flight = self._first_flight(flight_no, available_only=True)
        total_cost = flight["economy_price"] if cabin == "Economy Class" else flight["business_price"]
        total_cost += self.calculate_baggage_fee(user["membership_level"], cabin, baggage_count)
        if payment_method not in ["cash", "bank"]:
            return "Invalid payment method"
        balances = self.users.get(user_id)
        key = f"{payment_method}_balance"
        if total_cost > balances[key]:
            return f"Your {payment_method} balance is insufficient. Please consider using another payment method."
        balances[key] -= total_cost
        flight["seats_available"] -= 1
        reservation_id = f"res_{len(self.reservations) + 1}"
        self.reservations.append(
            {
                "reservation_id": reservation_id,
                "user_id": user_id,
                "flight_no": flight_no,
                "payment_method": payment_method,
                "cabin": cabin,
                "baggage": baggage_count,
            }
        )
        return f"Booking successful. Reservation ID: {reservation_id}. Total cost: {total_cost} yuan (including baggage fees)."

    def modify_flight(
        self,
        user_id,
        reservation_id,
        new_flight_no=None,
        new_cabin=None,
        add_baggage=0,
        new_payment_method=None,
    ):
        reservation = self._reservation(reservation_id, user_id)
        if not reservation:
            return "Reservation not found or user ID does not match."
        current = self._first_flight(reservation["flight_no"])
        if not current:
            return "Flight information not found."
        method = new_payment_method if new_payment_method else reservation["payment_method"]
        user = self.users[user_id]
        if not user:
            return "User information not found."
        said = []
        if new_flight_no and new_flight_no != reservation["flight_no"]:
            target = self._first_flight(new_flight_no)
            if not (
                target
                and (target["origin"], target["destination"]) == (current["origin"], current["destination"])
            ):
                return "Flight change failed: Invalid new flight number or destination does not match."
            reservation["flight_no"] = new_flight_no
            said.append("Flight number has been changed.")
        if new_cabin and new_cabin != reservation.get("cabin"):
            difference = self.calculate_price_difference(current, reservation["cabin"], new_cabin)
            reservation["cabin"] = new_cabin  # saved whether or not the difference is paid
            if difference > 0:
                if self.update_balance(user, method, -difference):
                    said.append(f"Cabin change successful. Price difference paid: {difference}.")
                else:
                    said.append("Insufficient balance to pay the cabin price difference.")
            elif difference < 0:
                self.update_balance(user, method, -difference)
                said.append(f"Cabin change successful. Price difference refunded: {-difference}.")
        if add_baggage > 0:
            free = self.get_baggage_allowance(user["membership_level"], reservation["cabin"])
            bags = reservation.get("baggage", 0) + add_baggage
            cost = max(0, bags - free) * BAG_FEE  # every bag above the allowance, again on each call
            if cost > 0:
                if self.update_balance(user, method, -cost):
                    said.append(f"Baggage has been added. Additional fee to be paid: {cost}.")
                else:
                    said.append("Insufficient balance to pay the additional baggage fees.")
            reservation["baggage"] = bags
        return " ".join(said or ["Modification completed with no additional fees."])

    def cancel_reservation(self, user_id, reservation_id, reason):
        user = self.users.get(user_id, None)
        if not user:
            return "Invalid user ID."
        reservation = self._reservation(reservation_id, user_id)
        if not reservation:
            return "Invalid reservation ID or it does not belong to the user."
        flight = self._first_flight(reservation["flight_no"])
        if not flight:
            return "Invalid flight information."
        departure = datetime.strptime(flight["depart_time"], _TIME)
        if NOW > departure:
            return "The flight segment has been used and cannot be canceled."
        fare = (
            flight["economy_price"] if reservation["cabin"] == "Economy Class" else flight["business_price"]
        )
        if reason == AIRLINE_CANCELLED:
            self.process_refund(user, fare)
            return (
                "The flight has been canceled. Your reservation will be canceled free of charge, "
                f"and {fare} yuan has been refunded."
            )
        if departure - NOW > timedelta(days=1):
            self.process_refund(user, fare)
            return f"More than 24 hours before departure. Free cancellation successful, {fare} yuan has been refunded."
        fee = fare * 0.1
        self.process_refund(user, fare - fee)
        return (
            f"Less than 24 hours before departure. A cancellation fee of {fee} yuan has been deducted, "
            f"and {fare - fee} yuan has been refunded."
        )
