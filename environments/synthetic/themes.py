"""Settings ("themes") each family's environments are dressed in: nouns, id prefixes, label pools, enums.

A theme fixes what the tables are called and what their records are named after; the family fixes
the tool shapes. Two environments of one theme still differ in field names, tool verbs, enum values,
optional tools and initial data, all drawn from the environment's seed.
"""

from __future__ import annotations

from dataclasses import dataclass

from environments.synthetic.vocabulary import NAME_WORDS, PLACE_WORDS, combos, person_names


@dataclass(frozen=True)
class Theme:
    name: str  # the setting in words
    nouns: dict[str, tuple[str, str, str]]  # table role -> (singular, plural, id prefix)
    labels: dict[str, tuple[str, ...]]  # table role -> pool of record labels
    choices: dict[str, tuple[str, ...]]  # enum field role -> values
    unit: str = ""  # what amounts are counted in (ledger family)


_PEOPLE = tuple(person_names())


def _problems(subjects: tuple[str, ...], problems: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(combos(subjects, problems))


TICKETING = (
    Theme(
        "IT helpdesk",
        {"item": ("ticket", "tickets", "TCK"), "person": ("technician", "technicians", "TEC")},
        {
            "item": _problems(
                (
                    "VPN",
                    "Laptop",
                    "Printer",
                    "Email",
                    "Wi-Fi",
                    "Monitor",
                    "Shared drive",
                    "Calendar",
                    "Docking station",
                    "Headset",
                    "Password manager",
                    "Phone",
                ),
                (
                    "not connecting",
                    "keeps crashing",
                    "very slow",
                    "shows an error",
                    "needs replacing",
                    "access request",
                    "stopped syncing",
                    "makes a noise",
                ),
            ),  # fmt: skip
            "person": _PEOPLE,
        },
        {"team": ("service desk", "network", "end-user devices", "identity")},
    ),
    Theme(
        "bug tracker",
        {"item": ("bug", "bugs", "BUG"), "person": ("developer", "developers", "DEV")},
        {
            "item": _problems(
                (
                    "Login form",
                    "Search results",
                    "Checkout",
                    "Export to CSV",
                    "Dark mode",
                    "Settings page",
                    "Upload dialog",
                    "Notifications",
                    "Dashboard chart",
                    "API pagination",
                ),
                (
                    "crashes on submit",
                    "renders blank",
                    "ignores filters",
                    "times out",
                    "shows stale data",
                    "breaks on mobile",
                    "double-counts items",
                    "loses input",
                ),
            ),  # fmt: skip
            "person": _PEOPLE,
        },
        {"team": ("frontend", "backend", "mobile", "platform")},
    ),
    Theme(
        "facilities desk",
        {"item": ("work order", "work orders", "WO"), "person": ("caretaker", "caretakers", "CRT")},
        {
            "item": _problems(
                (
                    "Lift",
                    "Kitchen tap",
                    "Meeting room blinds",
                    "Heating",
                    "Front door",
                    "Car park barrier",
                    "Fire alarm panel",
                    "Office lights",
                    "Water cooler",
                    "Bike shed lock",
                ),
                (
                    "is broken",
                    "leaks",
                    "is stuck",
                    "needs servicing",
                    "makes a noise",
                    "won't switch off",
                    "is flickering",
                    "needs replacing",
                ),
            ),  # fmt: skip
            "person": _PEOPLE,
        },
        {"team": ("plumbing", "electrical", "general repairs", "security")},
    ),
    Theme(
        "security operations centre",
        {"item": ("incident", "incidents", "INC"), "person": ("analyst", "analysts", "ANL")},
        {
            "item": _problems(
                (
                    "Phishing email",
                    "Suspicious login",
                    "Malware alert",
                    "Port scan",
                    "Data leak report",
                    "Lost badge",
                    "Expired certificate",
                    "Firewall rule change",
                    "Unknown USB device",
                ),
                (
                    "from finance",
                    "on the web server",
                    "at the branch office",
                    "on a VPN account",
                    "in the build system",
                    "on the HR laptop",
                    "reported by a customer",
                    "overnight",
                ),
            ),  # fmt: skip
            "person": _PEOPLE,
        },
        {"team": ("triage", "forensics", "threat intel", "response")},
    ),
    Theme(
        "customer support centre",
        {"item": ("case", "cases", "CAS"), "person": ("agent", "agents", "AGT")},
        {
            "item": _problems(
                (
                    "Refund",
                    "Late delivery",
                    "Damaged parcel",
                    "Wrong size",
                    "Billing",
                    "Account access",
                    "Subscription",
                    "Warranty",
                    "Gift card",
                    "Loyalty points",
                ),
                (
                    "question",
                    "complaint",
                    "escalation",
                    "follow-up",
                    "dispute",
                    "request",
                    "for order 1187",
                    "from a VIP customer",
                ),
            ),  # fmt: skip
            "person": _PEOPLE,
        },
        {"team": ("billing", "logistics", "retention", "technical")},
    ),
)

INVENTORY = (
    Theme(
        "hardware store",
        {"item": ("product", "products", "PRD"), "location": ("warehouse", "warehouses", "WH")},
        {
            "item": tuple(
                combos(
                    ("Cordless", "Steel", "Compact", "Heavy-duty", "Mini", "Pro", "Folding", "Magnetic"),
                    (
                        "drill",
                        "hammer",
                        "ladder",
                        "wrench",
                        "saw",
                        "tape measure",
                        "sander",
                        "toolbox",
                        "clamp",
                        "level",
                    ),
                )
            ),  # fmt: skip
            "location": tuple(f"{w} Depot" for w in PLACE_WORDS),
        },
        {"category": ("tools", "fixings", "garden", "paint", "electrical")},
    ),
    Theme(
        "pharmacy chain",
        {"item": ("medicine", "medicines", "MED"), "location": ("branch", "branches", "BR")},
        {
            "item": tuple(
                combos(
                    (
                        "Ibuprofen",
                        "Paracetamol",
                        "Cetirizine",
                        "Loratadine",
                        "Omeprazole",
                        "Vitamin D",
                        "Zinc",
                        "Aspirin",
                    ),
                    ("tablets 200mg", "capsules", "syrup", "tablets 500mg", "soluble", "gel", "drops"),
                )
            ),  # fmt: skip
            "location": tuple(f"{w} Pharmacy" for w in PLACE_WORDS),
        },
        {"category": ("pain relief", "allergy", "digestion", "supplements", "first aid")},
    ),
    Theme(
        "bookshop",
        {"item": ("book", "books", "BK"), "location": ("shelf", "shelves", "SH")},
        {
            "item": tuple(
                combos(
                    (
                        "The Silent",
                        "A Brief History of",
                        "The Lost",
                        "Notes on",
                        "The Last",
                        "Under the",
                        "Beyond the",
                        "The Hidden",
                    ),
                    (
                        "River",
                        "Garden",
                        "Empire",
                        "Mountain",
                        "Lighthouse",
                        "Machine",
                        "Orchard",
                        "Sea",
                        "Winter",
                    ),
                )
            ),  # fmt: skip
            "location": tuple(f"{w} shelf" for w in NAME_WORDS),
        },
        {"category": ("fiction", "history", "science", "poetry", "travel", "children")},
    ),
    Theme(
        "bike shop",
        {"item": ("part", "parts", "PRT"), "location": ("storeroom", "storerooms", "ST")},
        {
            "item": tuple(
                combos(
                    ("Carbon", "Alloy", "Tubeless", "Gravel", "Road", "Mountain", "Folding", "E-bike"),
                    (
                        "wheel",
                        "saddle",
                        "chain",
                        "brake pads",
                        "handlebar",
                        "pedals",
                        "tyre",
                        "derailleur",
                        "crankset",
                    ),
                )
            ),  # fmt: skip
            "location": tuple(f"{w} storeroom" for w in PLACE_WORDS),
        },
        {"category": ("drivetrain", "wheels", "brakes", "contact points", "accessories")},
    ),
)

BOOKING = (
    Theme(
        "restaurant",
        {"resource": ("table", "tables", "TBL"), "booking": ("reservation", "reservations", "RSV")},
        {"resource": tuple(f"{w} table" for w in NAME_WORDS), "booking": _PEOPLE},
        {"kind": ("window", "patio", "bar", "main hall", "private room")},
    ),
    Theme(
        "coworking space",
        {"resource": ("room", "rooms", "ROOM"), "booking": ("booking", "bookings", "BKG")},
        {"resource": tuple(f"{w} Room" for w in NAME_WORDS), "booking": _PEOPLE},
        {"kind": ("meeting room", "phone booth", "studio", "boardroom")},
    ),
    Theme(
        "car rental agency",
        {"resource": ("vehicle", "vehicles", "VEH"), "booking": ("rental", "rentals", "RNT")},
        {
            "resource": tuple(f"{w} {m}" for w in NAME_WORDS[:10] for m in ("hatchback", "van")),
            "booking": _PEOPLE,
        },
        {"kind": ("compact", "estate", "van", "electric")},
    ),
    Theme(
        "sports centre",
        {"resource": ("court", "courts", "CRT"), "booking": ("session", "sessions", "SES")},
        {"resource": tuple(f"{w} court" for w in NAME_WORDS), "booking": _PEOPLE},
        {"kind": ("tennis", "squash", "badminton", "basketball", "padel")},
    ),
)

LEDGER = (
    Theme(
        "bank",
        {"account": ("account", "accounts", "ACC"), "entry": ("transaction", "transactions", "TXN")},
        {"account": _PEOPLE},
        {"tier": ("basic", "plus", "premium")},
        unit="dollars",
    ),
    Theme(
        "loyalty programme",
        {"account": ("member", "members", "MEM"), "entry": ("points movement", "points movements", "PTS")},
        {"account": _PEOPLE},
        {"tier": ("bronze", "silver", "gold", "platinum")},
        unit="points",
    ),
    Theme(
        "school canteen",
        {"account": ("wallet", "wallets", "WAL"), "entry": ("wallet entry", "wallet entries", "ENT")},
        {"account": _PEOPLE},
        {"tier": ("pupil", "staff", "visitor")},
        unit="credits",
    ),
    Theme(
        "time bank",
        {"account": ("member", "members", "TB"), "entry": ("hours record", "hours records", "HRS")},
        {"account": _PEOPLE},
        {"tier": ("newcomer", "regular", "organiser")},
        unit="hours",
    ),
)

THEMES_BY_NAME: dict[str, Theme] = {
    theme.name: theme for group in (TICKETING, INVENTORY, BOOKING, LEDGER) for theme in group
}
