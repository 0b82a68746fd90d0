"""Which APIs this broker serves, at which versions, and the handler of each.

Each handler module registers itself with :func:`api`; ApiVersions is computed from this table,
never kept by hand. ``advertise_min`` lets an API advertise versions below the ones it serves
(a request at such a version closes the connection); no API needs it today. (Produce once did:
librdkafka < 2.11.1 turns off gzip/snappy/lz4 unless Produce's minimum is 0, KAFKA-18659; Produce
v0-2 are now served.)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kafkalite.protocol.api_keys import ApiKey

Handler = Callable[..., Any]


@dataclass(frozen=True)
class ApiSpec:
    key: ApiKey
    min_version: int        # lowest version served
    max_version: int
    advertise_min: int      # lowest version advertised in ApiVersions
    handler: Handler


#: Keyed by ApiKey members; an ``int`` from a request header finds the same entry (IntEnum).
HANDLERS: dict[int, ApiSpec] = {}


def api(key: ApiKey, min_version: int, max_version: int, *, advertise_min: int | None = None) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        if key in HANDLERS:
            raise RuntimeError(f"API key {key} registered twice")
        HANDLERS[key] = ApiSpec(key, min_version, max_version,
                                min_version if advertise_min is None else advertise_min, fn)
        return fn
    return register


def advertised() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every served API, sorted by key."""
    return [(s.key, s.advertise_min, s.max_version) for s in sorted(HANDLERS.values(), key=lambda s: s.key)]


def load_handlers() -> None:
    """Import every handler module so that its @api registrations run."""
    import importlib
    import pkgutil

    import kafkalite.broker.handlers as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{pkg.__name__}.{info.name}")
