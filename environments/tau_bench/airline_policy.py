"""Airline domain tools of the ``policy`` mode (opt-in), re-implemented from tau-bench's tool descriptions
(``airline/tools.json``) and rules (``airline/policy.md``). Tables: ``users``, ``flights``, ``reservations``.

Effects: booking takes seats, charges the payment methods (a gift card's balance goes down; a travel
certificate is used up, its remainder is not refundable) and adds the reservation to the user;
changing flights re-prices only new or re-cabined segments and charges or refunds the difference on
one gift card or credit card; adding bags costs $50 per extra non-free bag; cancelling records a
refund of every payment (paid back in 5-7 days, so balances do not change) and frees the seats.
Rules the policy says "the API does not check" (who may cancel, basic-economy changes) are left to
the agent; the rest of the policy's hard limits are checked here.

Identifiers a tool creates (reservation, certificate) are derived from the database state, so
replaying the same calls on a fresh copy always yields the same ids (the reward compares databases).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import Counter
from typing import Any

from environments.tau_bench.db import Database
from environments.tau_bench.toolkit import COMMON_TOOLS, Tool, ToolError, dump, money

TABLES = ("users", "flights", "reservations")
NOW = "2024-05-15T15:00:00"  # "The current time is 2024-05-15 15:00:00 EST" (policy.md)
BAG_PRICE, INSURANCE_PRICE, MAX_PASSENGERS = 50, 30, 5
PAYMENT_LIMITS = {"certificate": 1, "credit_card": 1, "gift_card": 3}  # per reservation (policy.md)
# City of each airport the flights serve (public IATA facts; unknown codes are listed as such).
AIRPORT_CITIES = {
    "ATL": "Atlanta", "BOS": "Boston", "CLT": "Charlotte", "DEN": "Denver", "DFW": "Dallas-Fort Worth",
    "DTW": "Detroit", "EWR": "Newark", "IAH": "Houston", "JFK": "New York", "LAS": "Las Vegas",
    "LAX": "Los Angeles", "LGA": "New York", "MCO": "Orlando", "MIA": "Miami", "MSP": "Minneapolis",
    "ORD": "Chicago", "PHL": "Philadelphia", "PHX": "Phoenix", "SEA": "Seattle", "SFO": "San Francisco",
}  # fmt: skip


def _user(db: Database, user_id: str) -> dict[str, Any]:
    if db.get("users", user_id) is None:
        raise ToolError("user not found")
    return db.get("users", user_id)


def _reservation(db: Database, reservation_id: str) -> dict[str, Any]:
    if db.get("reservations", reservation_id) is None:
        raise ToolError("reservation not found")
    return db.get("reservations", reservation_id)


def _method(user: dict[str, Any], payment_id: str) -> dict[str, Any]:
    method = user["payment_methods"].get(payment_id)
    if method is None:
        raise ToolError(f"payment method {payment_id} not found")
    return method


def _bookable(db: Database, flight_number: str, date: str, cabin: str, seats: int) -> dict[str, Any]:
    """The flight's record for ``date``, checked to be bookable with ``seats`` seats in ``cabin``."""
    flight = db.get("flights", flight_number)
    if flight is None:
        raise ToolError(f"flight {flight_number} not found")
    day = flight["dates"].get(date)
    if day is None or day["status"] != "available":
        raise ToolError(f"flight {flight_number} not available on date {date}")
    if day["available_seats"][cabin] < seats:
        raise ToolError(f"not enough seats on flight {flight_number} on {date}")
    return flight


def _move_seats(db: Database, flight_number: str, date: str, cabin: str, delta: int) -> None:
    """Take (delta < 0) or free (delta > 0) seats; dates no longer on sale are left as they are."""
    day = (db.get("flights", flight_number) or {}).get("dates", {}).get(date)
    if day is not None and day["status"] == "available":
        seats = db.edit("flights", flight_number)["dates"][date]["available_seats"]
        seats[cabin] += delta


def _segment(flight: dict[str, Any], date: str, price: float) -> dict[str, Any]:
    return {
        "origin": flight["origin"],
        "destination": flight["destination"],
        "flight_number": flight["flight_number"],
        "date": date,
        "price": price,
    }


def _spend(db: Database, user_id: str, payment_id: str, amount: float) -> None:
    """Apply a charge (or, if negative, a refund) to a stored balance."""
    method = db.get("users", user_id)["payment_methods"][payment_id]
    if method["source"] == "gift_card":
        db.edit("users", user_id)["payment_methods"][payment_id]["amount"] = money(method["amount"] - amount)
    elif method["source"] == "certificate":  # single use: the remainder is not refundable
        del db.edit("users", user_id)["payment_methods"][payment_id]


def _check_balance(method: dict[str, Any], amount: float) -> None:
    if method["source"] in ("gift_card", "certificate") and amount > method["amount"]:
        raise ToolError(f"not enough balance in payment method {method['id']}")


def _new_id(prefix: str, seed: str, taken, length: int, alphabet: str) -> str:
    """A deterministic id not in ``taken``: the same database state always gives the same id."""
    for attempt in range(1000):
        digest = int(hashlib.sha256(f"{seed}|{attempt}".encode()).hexdigest(), 16)
        chars = []
        for _ in range(length):
            digest, r = divmod(digest, len(alphabet))
            chars.append(alphabet[r])
        candidate = prefix + "".join(chars)
        if candidate not in taken:
            return candidate
    raise ToolError("could not allocate a new id")


# --- read tools -----------------------------------------------------------------------------------


def get_user_details(db: Database, user_id: str) -> str:
    return dump(_user(db, user_id))


def get_reservation_details(db: Database, reservation_id: str) -> str:
    return dump(_reservation(db, reservation_id))


def list_all_airports(db: Database) -> str:
    codes = sorted({f[end] for f in db.tables["flights"].values() for end in ("origin", "destination")})
    return dump({code: AIRPORT_CITIES.get(code, "unknown city") for code in codes})


def _on_sale(flight: dict[str, Any], date: str) -> dict[str, Any] | None:
    day = flight["dates"].get(date)
    if day is None or day["status"] != "available":
        return None
    keys = (
        "flight_number",
        "origin",
        "destination",
        "scheduled_departure_time_est",
        "scheduled_arrival_time_est",
    )
    return {**{k: flight[k] for k in keys}, "date": date, **day}


def search_direct_flight(db: Database, origin: str, destination: str, date: str) -> str:
    found = [
        offer
        for flight in db.tables["flights"].values()
        if flight["origin"] == origin and flight["destination"] == destination
        if (offer := _on_sale(flight, date)) is not None
    ]
    return dump(found)


def _next_day(date: str) -> str:
    return (dt.date.fromisoformat(date) + dt.timedelta(days=1)).isoformat()


def search_onestop_flight(db: Database, origin: str, destination: str, date: str) -> str:
    """Pairs of bookable flights origin -> X -> destination; the second leg leaves after the first lands
    (on the next day when the first lands after midnight, marked ``+1`` in the schedule)."""
    flights = db.tables["flights"].values()
    pairs = []
    for first in flights:
        if first["origin"] != origin or (leg1 := _on_sale(first, date)) is None:
            continue
        arrival = first["scheduled_arrival_time_est"]
        second_date = _next_day(date) if arrival.endswith("+1") else date
        for second in flights:
            if second["origin"] != first["destination"] or second["destination"] != destination:
                continue
            if second["scheduled_departure_time_est"] <= arrival.removesuffix("+1"):
                continue
            if (leg2 := _on_sale(second, second_date)) is not None:
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
    user = _user(db, user_id)
    if not 1 <= len(passengers) <= MAX_PASSENGERS:
        raise ToolError(f"a reservation has 1 to {MAX_PASSENGERS} passengers, got {len(passengers)}")
    if not flights:
        raise ToolError("a reservation needs at least one flight")
    if not 0 <= nonfree_baggages <= total_baggages:
        raise ToolError("baggage counts should satisfy 0 <= nonfree_baggages <= total_baggages")
    segments, total = [], 0.0
    for leg in flights:
        flight = _bookable(db, leg["flight_number"], leg["date"], cabin, len(passengers))
        price = flight["dates"][leg["date"]]["prices"][cabin]
        segments.append(_segment(flight, leg["date"], price))
        total += price * len(passengers)
    total += BAG_PRICE * nonfree_baggages + (INSURANCE_PRICE * len(passengers) if insurance == "yes" else 0)
    sources = Counter()
    for payment in payment_methods:
        method = _method(user, payment["payment_id"])
        _check_balance(method, payment["amount"])
        sources[method["source"]] += 1
    for kind, limit in PAYMENT_LIMITS.items():
        if sources[kind] > limit:
            raise ToolError(f"at most {limit} {kind.replace('_', ' ')} payment(s) per reservation")
    paid = money(sum(p["amount"] for p in payment_methods))
    if paid != money(total):
        raise ToolError(f"payment amount does not add up, total price is {money(total)}, but paid {paid}")

    reservation_id = _new_id(
        "",
        f"{user_id}|{len(db.tables['reservations'])}",
        db.tables["reservations"],
        6,
        "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789",
    )
    for payment in payment_methods:
        _spend(db, user_id, payment["payment_id"], payment["amount"])
    for leg in flights:
        _move_seats(db, leg["flight_number"], leg["date"], cabin, -len(passengers))
    reservation = {
        "reservation_id": reservation_id,
        "user_id": user_id,
        "origin": origin,
        "destination": destination,
        "flight_type": flight_type,
        "cabin": cabin,
        "flights": segments,
        "passengers": [dict(p) for p in passengers],
        "payment_history": [{"payment_id": p["payment_id"], "amount": p["amount"]} for p in payment_methods],
        "created_at": NOW,
        "total_baggages": total_baggages,
        "nonfree_baggages": nonfree_baggages,
        "insurance": insurance,
    }
    db.insert("reservations", reservation_id, reservation)
    db.edit("users", user_id)["reservations"].append(reservation_id)
    return dump(reservation)


def cancel_reservation(db: Database, reservation_id: str) -> str:
    if _reservation(db, reservation_id).get("status") == "cancelled":
        raise ToolError("reservation is already cancelled")
    reservation = db.edit("reservations", reservation_id)
    refunds = [
        {"payment_id": p["payment_id"], "amount": -p["amount"]} for p in reservation["payment_history"]
    ]
    reservation["payment_history"].extend(refunds)
    reservation["status"] = "cancelled"
    for leg in reservation["flights"]:
        _move_seats(
            db, leg["flight_number"], leg["date"], reservation["cabin"], len(reservation["passengers"])
        )
    return dump(reservation)


def update_reservation_flights(
    db: Database, reservation_id: str, cabin: str, flights: list[dict[str, Any]], payment_id: str
) -> str:
    """Segments kept as they are (same flight, date and cabin) keep their price; others are priced now."""
    reservation = _reservation(db, reservation_id)
    method = _method(_user(db, reservation["user_id"]), payment_id)
    if method["source"] not in ("gift_card", "credit_card"):
        raise ToolError("flight changes are paid or refunded with one gift card or credit card")
    if not flights:
        raise ToolError("a reservation needs at least one flight")
    n = len(reservation["passengers"])
    old = {(s["flight_number"], s["date"]): s for s in reservation["flights"]}
    segments = []
    for leg in flights:
        key = (leg["flight_number"], leg["date"])
        if key in old and cabin == reservation["cabin"]:
            segments.append(dict(old[key]))
            continue
        flight = _bookable(db, leg["flight_number"], leg["date"], cabin, n)
        segments.append(_segment(flight, leg["date"], flight["dates"][leg["date"]]["prices"][cabin]))
    difference = money(
        n * (sum(s["price"] for s in segments) - sum(s["price"] for s in reservation["flights"]))
    )
    _check_balance(method, difference)

    new = {(s["flight_number"], s["date"]) for s in segments}
    kept = old.keys() & new if cabin == reservation["cabin"] else set()
    for key in old.keys() - kept:  # dropped or re-cabined segments free their seats
        _move_seats(db, *key, reservation["cabin"], n)
    for key in new - kept:
        _move_seats(db, *key, cabin, -n)
    reservation = db.edit("reservations", reservation_id)
    reservation["flights"], reservation["cabin"] = segments, cabin
    if difference != 0:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": difference})
        _spend(db, reservation["user_id"], payment_id, difference)
    return dump(reservation)


def update_reservation_baggages(
    db: Database, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
) -> str:
    reservation = _reservation(db, reservation_id)
    method = _method(_user(db, reservation["user_id"]), payment_id)
    if total_baggages < reservation["total_baggages"]:
        raise ToolError("checked bags can be added but not removed")
    if not 0 <= nonfree_baggages <= total_baggages:
        raise ToolError("baggage counts should satisfy 0 <= nonfree_baggages <= total_baggages")
    cost = BAG_PRICE * max(0, nonfree_baggages - reservation["nonfree_baggages"])
    if method["source"] == "certificate":
        raise ToolError("bags are paid with a gift card or credit card")
    _check_balance(method, cost)
    reservation = db.edit("reservations", reservation_id)
    reservation["total_baggages"], reservation["nonfree_baggages"] = total_baggages, nonfree_baggages
    if cost:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": cost})
        _spend(db, reservation["user_id"], payment_id, cost)
    return dump(reservation)


def update_reservation_passengers(db: Database, reservation_id: str, passengers: list[dict[str, Any]]) -> str:
    if len(passengers) != len(_reservation(db, reservation_id)["passengers"]):
        raise ToolError("number of passengers does not match")
    reservation = db.edit("reservations", reservation_id)
    reservation["passengers"] = [dict(p) for p in passengers]
    return dump(reservation)


def send_certificate(db: Database, user_id: str, amount: float) -> str:
    user = _user(db, user_id)
    if amount <= 0:
        raise ToolError("certificate amount should be positive")
    seed = f"{user_id}|{amount}|{len(user['payment_methods'])}"
    certificate_id = _new_id("certificate_", seed, user["payment_methods"], 7, "0123456789")
    methods = db.edit("users", user_id)["payment_methods"]
    methods[certificate_id] = {"source": "certificate", "amount": amount, "id": certificate_id}
    return f"Certificate {certificate_id} added to user {user_id} with amount {amount}."


TOOLS: dict[str, Tool] = {
    **COMMON_TOOLS,
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
    "book_reservation": ("reservations", "users.reservations", "users.payment_methods", "flights.dates"),
    "cancel_reservation": ("reservations.status", "reservations.payment_history", "flights.dates"),
    "update_reservation_flights": (
        "reservations.flights",
        "reservations.cabin",
        "reservations.payment_history",
        "users.payment_methods",
        "flights.dates",
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
