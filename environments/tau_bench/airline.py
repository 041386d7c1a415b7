"""Airline domain tools with tau-bench's own semantics (the default; ``semantics: original``).

Written from the observed behaviour of sierra-research/tau-bench@59a200c (recorded outputs in
``tests/environments/data``), not from its code. What the original does and the policy-checked mode
(``airline_policy.py``) does not:

- ``flights`` is never written: booking, cancelling and changing flights leave ``available_seats``
  as they are ("assume it takes time to be updated"), so later searches see the same seats.
- ``update_reservation_flights`` keeps the reservation's cabin; only the flights and the payment
  history change. Segments kept in the same cabin keep their price.
- ``cancel_reservation`` has no status check: each call appends the negation of *every* entry of the
  payment history (a second cancel appends the refunds' negations too).
- No ``policy.md`` limits: any number of passengers, certificates and cards, bags may go down and
  non-free bags may exceed total bags, a certificate of any amount.
- New ids are the original's: reservations ``HATHAT``, ``HATHAU``, ``HATHAV`` (the first free one;
  the third is reused when all three exist), certificates ``certificate_3221322`` .. ``_3221324``.
- Searches: a direct flight is the flight's fields plus that day's record (no ``date`` key); a
  one-stop pair keeps zero-layover connections, dates the second leg ``2024-05-<day + 1>`` (not
  zero-padded) after an overnight first leg, and shows the second flight's record of the *first*
  leg's date. ``list_all_airports`` returns the original's fixed list of 20 airports.
- Gift-card amounts are not rounded; payments must add up exactly (no rounding either).
"""

from __future__ import annotations

import copy
from typing import Any

from environments.tau_bench.db import Database
from environments.tau_bench.toolkit import ORIGINAL_COMMON_TOOLS, Tool, dump

TABLES = ("users", "flights", "reservations")
CREATED_AT = "2024-05-15T15:00:00"
RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
CERTIFICATE_IDS = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
# The original's airport list, in its order (LGA is listed as "LaGuardia", DFW as "Dallas").
AIRPORTS = {
    "SFO": "San Francisco", "JFK": "New York", "LAX": "Los Angeles", "ORD": "Chicago", "DFW": "Dallas",
    "DEN": "Denver", "SEA": "Seattle", "ATL": "Atlanta", "MIA": "Miami", "BOS": "Boston",
    "PHX": "Phoenix", "IAH": "Houston", "LAS": "Las Vegas", "MCO": "Orlando", "EWR": "Newark",
    "CLT": "Charlotte", "MSP": "Minneapolis", "DTW": "Detroit", "PHL": "Philadelphia", "LGA": "LaGuardia",
}  # fmt: skip


def _price_legs(db: Database, legs: list, cabin: str, seats: int) -> tuple[Any, str | None]:
    """Fill each requested leg with its price, origin and destination; the total for ``seats``."""
    total = 0
    for leg in legs:
        number = leg["flight_number"]
        if number not in db.tables["flights"]:
            return None, f"Error: flight {number} not found"
        flight = db.tables["flights"][number]
        if leg["date"] not in flight["dates"]:
            return None, f"Error: flight {number} not found on date {leg['date']}"
        day = flight["dates"][leg["date"]]
        if day["status"] != "available":
            return None, f"Error: flight {number} not available on date {leg['date']}"
        if day["available_seats"][cabin] < seats:
            return None, f"Error: not enough seats on flight {number}"
        leg["price"] = day["prices"][cabin]
        leg["origin"] = flight["origin"]
        leg["destination"] = flight["destination"]
        total += leg["price"] * seats
    return total, None


def _payment_for_change(db: Database, user_id: str, payment_id: str, amount) -> str | None:
    methods = db.tables["users"][user_id]["payment_methods"]
    if payment_id not in methods:
        return "Error: payment method not found"
    method = methods[payment_id]
    if method["source"] == "certificate":
        return "Error: certificate cannot be used to update reservation"
    if method["source"] == "gift_card" and method["amount"] < amount:
        return "Error: gift card balance is not enough"
    return None


# --- read tools -----------------------------------------------------------------------------------


def get_user_details(db: Database, user_id: str) -> str:
    users = db.tables["users"]
    return dump(users[user_id]) if user_id in users else "Error: user not found"


def get_reservation_details(db: Database, reservation_id: str) -> str:
    reservations = db.tables["reservations"]
    # "user not found" is the original's wording for an unknown reservation
    return dump(reservations[reservation_id]) if reservation_id in reservations else "Error: user not found"


def list_all_airports(db: Database) -> str:
    return dump(AIRPORTS)


def _offer(flight: dict[str, Any], day: dict[str, Any]) -> dict[str, Any]:
    offer = {key: value for key, value in flight.items() if key != "dates"}
    offer.update(day)
    return offer


def search_direct_flight(db: Database, origin: str, destination: str, date: str) -> str:
    found = []
    for flight in db.tables["flights"].values():
        if flight["origin"] == origin and flight["destination"] == destination:
            if date in flight["dates"] and flight["dates"][date]["status"] == "available":
                found.append(_offer(flight, flight["dates"][date]))
    return dump(found)


def search_onestop_flight(db: Database, origin: str, destination: str, date: str) -> str:
    flights = db.tables["flights"].values()
    pairs = []
    for first in flights:
        if first["origin"] != origin:
            continue
        for second in flights:
            if second["destination"] != destination or first["destination"] != second["origin"]:
                continue
            arrival = first["scheduled_arrival_time_est"]
            second_date = f"2024-05-{int(date[-2:]) + 1}" if "+1" in arrival else date
            if arrival > second["scheduled_departure_time_est"]:  # compared as text, "+1" included
                continue
            if date in first["dates"] and second_date in second["dates"]:
                if (
                    first["dates"][date]["status"] == "available"
                    and second["dates"][second_date]["status"] == "available"
                ):
                    leg1 = _offer(first, first["dates"][date])
                    leg1["date"] = date
                    leg2 = _offer(second, second["dates"][date])
                    leg2["date"] = second_date
                    pairs.append([leg1, leg2])
    return dump(pairs)


# --- write tools ----------------------------------------------------------------------------------


def book_reservation(
    db: Database,
    user_id: str,
    origin: str,
    destination: str,
    flight_type: str,
    cabin: str,
    flights: list[dict[str, Any]],
    passengers: list[dict[str, Any]],
    payment_methods: list[dict[str, Any]],
    total_baggages: int,
    nonfree_baggages: int,
    insurance: str,
) -> str:
    users, reservations = db.tables["users"], db.tables["reservations"]
    if user_id not in users:
        return "Error: user not found"
    reservation_id = next((rid for rid in RESERVATION_IDS if rid not in reservations), RESERVATION_IDS[-1])
    reservation = {
        "reservation_id": reservation_id,
        "user_id": user_id,
        "origin": origin,
        "destination": destination,
        "flight_type": flight_type,
        "cabin": cabin,
        "flights": copy.deepcopy(flights),
        "passengers": passengers,
        "payment_history": payment_methods,
        "created_at": CREATED_AT,
        "total_baggages": total_baggages,
        "nonfree_baggages": nonfree_baggages,
        "insurance": insurance,
    }
    total, error = _price_legs(db, reservation["flights"], cabin, len(passengers))
    if error:
        return error
    if insurance == "yes":
        total += 30 * len(passengers)
    total += 50 * nonfree_baggages
    methods = users[user_id]["payment_methods"]
    for payment in payment_methods:
        payment_id, amount = payment["payment_id"], payment["amount"]
        if payment_id not in methods:
            return f"Error: payment method {payment_id} not found"
        if (
            methods[payment_id]["source"] in ("gift_card", "certificate")
            and methods[payment_id]["amount"] < amount
        ):
            return f"Error: not enough balance in payment method {payment_id}"
    paid = sum(payment["amount"] for payment in payment_methods)
    if paid != total:
        return f"Error: payment amount does not add up, total price is {total}, but paid {paid}"
    user = db.edit("users", user_id)
    for payment in payment_methods:
        payment_id = payment["payment_id"]
        if user["payment_methods"][payment_id]["source"] == "gift_card":
            user["payment_methods"][payment_id]["amount"] -= payment["amount"]
        elif user["payment_methods"][payment_id]["source"] == "certificate":
            del user["payment_methods"][payment_id]  # used up, whatever the remainder
    db.insert("reservations", reservation_id, reservation)
    user["reservations"].append(reservation_id)
    return dump(reservation)


def cancel_reservation(db: Database, reservation_id: str) -> str:
    if reservation_id not in db.tables["reservations"]:
        return "Error: reservation not found"
    reservation = db.edit("reservations", reservation_id)
    refunds = [
        {"payment_id": p["payment_id"], "amount": -p["amount"]} for p in reservation["payment_history"]
    ]
    reservation["payment_history"].extend(refunds)
    reservation["status"] = "cancelled"
    return dump(reservation)


def update_reservation_flights(
    db: Database, reservation_id: str, cabin: str, flights: list[dict[str, Any]], payment_id: str
) -> str:
    reservations = db.tables["reservations"]
    if reservation_id not in reservations:
        return "Error: reservation not found"
    reservation = reservations[reservation_id]
    seats = len(reservation["passengers"])
    legs, total = copy.deepcopy(flights), 0
    for leg in legs:
        kept = [
            old
            for old in reservation["flights"]
            if old["flight_number"] == leg["flight_number"]
            and old["date"] == leg["date"]
            and cabin == reservation["cabin"]
        ]
        if kept:  # the same flight in the same cabin keeps its price
            total += kept[0]["price"] * seats
            leg["price"], leg["origin"], leg["destination"] = (
                kept[0]["price"],
                kept[0]["origin"],
                kept[0]["destination"],
            )
            continue
        price, error = _price_legs(db, [leg], cabin, seats)
        if error:
            return error
        total += price
    total -= sum(old["price"] for old in reservation["flights"]) * seats
    if (error := _payment_for_change(db, reservation["user_id"], payment_id, total)) is not None:
        return error
    if db.tables["users"][reservation["user_id"]]["payment_methods"][payment_id]["source"] == "gift_card":
        db.edit("users", reservation["user_id"])["payment_methods"][payment_id]["amount"] -= total
    reservation = db.edit("reservations", reservation_id)
    reservation["flights"] = legs  # the cabin stays as it was
    if total != 0:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": total})
    return dump(reservation)


def update_reservation_baggages(
    db: Database, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
) -> str:
    reservations = db.tables["reservations"]
    if reservation_id not in reservations:
        return "Error: reservation not found"
    reservation = reservations[reservation_id]
    total = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
    if (error := _payment_for_change(db, reservation["user_id"], payment_id, total)) is not None:
        return error
    reservation = db.edit("reservations", reservation_id)
    reservation["total_baggages"] = total_baggages
    reservation["nonfree_baggages"] = nonfree_baggages
    if db.tables["users"][reservation["user_id"]]["payment_methods"][payment_id]["source"] == "gift_card":
        db.edit("users", reservation["user_id"])["payment_methods"][payment_id]["amount"] -= total
    if total != 0:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": total})
    return dump(reservation)


def update_reservation_passengers(db: Database, reservation_id: str, passengers: list[dict[str, Any]]) -> str:
    reservations = db.tables["reservations"]
    if reservation_id not in reservations:
        return "Error: reservation not found"
    if len(passengers) != len(reservations[reservation_id]["passengers"]):
        return "Error: number of passengers does not match"
    reservation = db.edit("reservations", reservation_id)
    reservation["passengers"] = passengers
    return dump(reservation)


def send_certificate(db: Database, user_id: str, amount: int) -> str:
    if user_id not in db.tables["users"]:
        return "Error: user not found"
    for certificate_id in CERTIFICATE_IDS:
        if certificate_id not in db.tables["users"][user_id]["payment_methods"]:
            methods = db.edit("users", user_id)["payment_methods"]
            methods[certificate_id] = {"source": "certificate", "amount": amount, "id": certificate_id}
            return f"Certificate {certificate_id} added to user {user_id} with amount {amount}."
    return None  # the original answers nothing when the user already holds all three


TOOLS: dict[str, Tool] = {
    **ORIGINAL_COMMON_TOOLS,
    "get_user_details": get_user_details,
    "get_reservation_details": get_reservation_details,
    "list_all_airports": list_all_airports,
    "search_direct_flight": search_direct_flight,
    "search_onestop_flight": search_onestop_flight,
    "book_reservation": book_reservation,
    "cancel_reservation": cancel_reservation,
    "update_reservation_flights": update_reservation_flights,
    "update_reservation_baggages": update_reservation_baggages,
    "update_reservation_passengers": update_reservation_passengers,
    "send_certificate": send_certificate,
}

# What each write tool may change (table.field); used for the catalogue's state_fields.
WRITES: dict[str, tuple[str, ...]] = {
    "book_reservation": ("reservations", "users.reservations", "users.payment_methods"),
    "cancel_reservation": ("reservations.status", "reservations.payment_history"),
    "update_reservation_flights": (
        "reservations.flights",
        "reservations.payment_history",
        "users.payment_methods",
    ),
    "update_reservation_baggages": (
        "reservations.total_baggages",
        "reservations.nonfree_baggages",
        "reservations.payment_history",
        "users.payment_methods",
    ),
    "update_reservation_passengers": ("reservations.passengers",),
    "send_certificate": ("users.payment_methods",),
}
