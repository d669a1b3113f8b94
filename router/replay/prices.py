"""The replay's prices are the live record's: router/load/prices.py (one pricing for both)."""

from router.load.prices import (
    LOCAL_PROVIDERS,
    LOOPBACK,
    PRICE_SOURCES,
    TOKEN_PRICES,
    Catalog,
    Tokens,
    read_catalog,
    usd,
)

__all__ = ["LOCAL_PROVIDERS", "LOOPBACK", "PRICE_SOURCES", "TOKEN_PRICES", "Catalog", "Tokens",
           "read_catalog", "usd"]
