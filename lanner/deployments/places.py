"""Where each of the SDK's 42 endpoint regions is, for the model page's region picker. The SDK names a region only
by its id (``europe-west4``): the picker showed the 42 ids as one flat list, which told a new user neither where
an endpoint would be nor how to find a place in it (issue 27: "42 regions in one unlabelled box"). The ids are
Google Cloud's region names, so the places are those regions' cities; the areas are the groups its console uses."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any

AMERICAS, EUROPE, ASIA, MIDDLE_EAST, AFRICA = "Americas", "Europe", "Asia Pacific", "Middle East", "Africa"
AREAS = (AMERICAS, EUROPE, ASIA, MIDDLE_EAST, AFRICA)

PLACES: dict[str, tuple[str, str]] = {
    "us-central1": (AMERICAS, "Iowa, USA"), "us-east1": (AMERICAS, "South Carolina, USA"),
    "us-east4": (AMERICAS, "Northern Virginia, USA"), "us-east5": (AMERICAS, "Columbus, Ohio, USA"),
    "us-south1": (AMERICAS, "Dallas, Texas, USA"), "us-west1": (AMERICAS, "Oregon, USA"),
    "us-west2": (AMERICAS, "Los Angeles, USA"), "us-west3": (AMERICAS, "Salt Lake City, USA"),
    "us-west4": (AMERICAS, "Las Vegas, USA"), "northamerica-northeast1": (AMERICAS, "Montréal, Canada"),
    "northamerica-northeast2": (AMERICAS, "Toronto, Canada"), "northamerica-south1": (AMERICAS, "Querétaro, Mexico"),
    "southamerica-east1": (AMERICAS, "São Paulo, Brazil"), "southamerica-west1": (AMERICAS, "Santiago, Chile"),
    "europe-central2": (EUROPE, "Warsaw, Poland"), "europe-north1": (EUROPE, "Finland"),
    "europe-north2": (EUROPE, "Stockholm, Sweden"), "europe-southwest1": (EUROPE, "Madrid, Spain"),
    "europe-west1": (EUROPE, "Belgium"), "europe-west2": (EUROPE, "London, UK"),
    "europe-west3": (EUROPE, "Frankfurt, Germany"), "europe-west4": (EUROPE, "Netherlands"),
    "europe-west6": (EUROPE, "Zurich, Switzerland"), "europe-west8": (EUROPE, "Milan, Italy"),
    "europe-west9": (EUROPE, "Paris, France"), "europe-west10": (EUROPE, "Berlin, Germany"),
    "europe-west12": (EUROPE, "Turin, Italy"),
    "asia-east1": (ASIA, "Taiwan"), "asia-east2": (ASIA, "Hong Kong"),
    "asia-northeast1": (ASIA, "Tokyo, Japan"), "asia-northeast2": (ASIA, "Osaka, Japan"),
    "asia-northeast3": (ASIA, "Seoul, South Korea"), "asia-south1": (ASIA, "Mumbai, India"),
    "asia-south2": (ASIA, "Delhi, India"), "asia-southeast1": (ASIA, "Singapore"),
    "asia-southeast2": (ASIA, "Jakarta, Indonesia"), "asia-southeast3": (ASIA, "Bangkok, Thailand"),
    "australia-southeast1": (ASIA, "Sydney, Australia"), "australia-southeast2": (ASIA, "Melbourne, Australia"),
    "me-central1": (MIDDLE_EAST, "Doha, Qatar"), "me-west1": (MIDDLE_EAST, "Tel Aviv, Israel"),
    "africa-south1": (AFRICA, "Johannesburg, South Africa"),
}


def grouped(regions: Iterable[str]) -> list[dict[str, Any]]:
    """The offered regions by area (in ``AREAS`` order, empty areas left out), each area's by place, for
    ``<optgroup>``s: ``[{"area": ..., "regions": [{"id": ..., "place": ...}]}]``."""
    offered = sorted(({"id": r, "area": PLACES[r][0], "place": PLACES[r][1]} for r in regions),
                     key=lambda r: (AREAS.index(r["area"]), _plain(r["place"])))
    return [{"area": area, "regions": [r for r in offered if r["area"] == area]}
            for area in AREAS if any(r["area"] == area for r in offered)]


def _plain(text: str) -> str:
    """Without accents, so São Paulo sorts under S with the others."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
