"""How a configured class name becomes a Python class (Kafka's DelegatingClassLoader and aliases).

Worker and connector configurations name plugins as Kafka users write them:
``connector.class=org.apache.kafka.connect.file.FileStreamSourceConnector``, or an alias
(``FileStreamSource``), ``value.converter=io.confluent.connect.avro.AvroConverter``,
``transforms.x.type=org.apache.kafka.connect.transforms.InsertField$Value``. Resolution order:

1. the built-in table: Kafka's and Confluent's fully-qualified Java names of the plugins kafkalite
   implements, and Kafka's aliases of them (the simple class name, and for connectors and
   converters that name without its ``Connector``/``Converter`` suffix, each only when unambiguous);
2. Python entry points of the groups ``kafkalite.connect.connectors``, ``.converters``,
   ``.header_converters``, ``.transforms``, ``.predicates`` (a third-party package registers its
   plugin under a name; its ``module:Class`` value works too);
3. ``package.module:Class`` or ``package.module.Class``.
"""
from __future__ import annotations

import enum
import importlib
import logging
from importlib import metadata
from typing import Any, Iterable

from .errors import ConnectException

__all__ = ["PluginType", "PluginError", "load_class", "resolve", "aliases", "connector_plugins",
           "plugin_type_of", "BUILTIN", "ENTRY_POINT_GROUPS"]

log = logging.getLogger(__name__)


class PluginType(enum.Enum):
    SOURCE = "source"
    SINK = "sink"
    CONNECTOR = "connector"
    CONVERTER = "converter"
    HEADER_CONVERTER = "header_converter"
    TRANSFORMATION = "transformation"
    PREDICATE = "predicate"
    UNKNOWN = "unknown"


class PluginError(ConnectException):
    """A class name that resolves to nothing importable."""


ENTRY_POINT_GROUPS = {
    PluginType.CONNECTOR: "kafkalite.connect.connectors",
    PluginType.CONVERTER: "kafkalite.connect.converters",
    PluginType.HEADER_CONVERTER: "kafkalite.connect.header_converters",
    PluginType.TRANSFORMATION: "kafkalite.connect.transforms",
    PluginType.PREDICATE: "kafkalite.connect.predicates",
}

_C = "kafkalite.connect.converters"
_T = "kafkalite.connect.transforms"
_K = "org.apache.kafka.connect.transforms."

#: Java fully-qualified name -> (Python "module:Class", kinds it serves).
BUILTIN: dict[str, tuple[str, tuple[PluginType, ...]]] = {
    # connectors
    "org.apache.kafka.connect.file.FileStreamSourceConnector":
        ("kafkalite.connect.connectors.file:FileStreamSourceConnector", (PluginType.CONNECTOR,)),
    "org.apache.kafka.connect.file.FileStreamSinkConnector":
        ("kafkalite.connect.connectors.file:FileStreamSinkConnector", (PluginType.CONNECTOR,)),
    "io.confluent.connect.jdbc.JdbcSourceConnector":
        ("kafkalite.connect.connectors.jdbc:JdbcSourceConnector", (PluginType.CONNECTOR,)),
    "io.confluent.connect.jdbc.JdbcSinkConnector":
        ("kafkalite.connect.connectors.jdbc:JdbcSinkConnector", (PluginType.CONNECTOR,)),
    "kafkalite.connect.connectors.parquet.ParquetSinkConnector":
        ("kafkalite.connect.connectors.parquet:ParquetSinkConnector", (PluginType.CONNECTOR,)),
    # converters (Kafka's JsonConverter, StringConverter, ByteArrayConverter and the number
    # converters are header converters too)
    "org.apache.kafka.connect.json.JsonConverter":
        (f"{_C}.json:JsonConverter", (PluginType.CONVERTER, PluginType.HEADER_CONVERTER)),
    "org.apache.kafka.connect.storage.StringConverter":
        (f"{_C}.string:StringConverter", (PluginType.CONVERTER, PluginType.HEADER_CONVERTER)),
    "org.apache.kafka.connect.converters.ByteArrayConverter":
        (f"{_C}.bytes:ByteArrayConverter", (PluginType.CONVERTER, PluginType.HEADER_CONVERTER)),
    "org.apache.kafka.connect.converters.ShortConverter":
        (f"{_C}.number:ShortConverter", (PluginType.CONVERTER, PluginType.HEADER_CONVERTER)),
    "org.apache.kafka.connect.converters.IntegerConverter":
        (f"{_C}.number:IntegerConverter", (PluginType.CONVERTER, PluginType.HEADER_CONVERTER)),
    "org.apache.kafka.connect.converters.LongConverter":
        (f"{_C}.number:LongConverter", (PluginType.CONVERTER, PluginType.HEADER_CONVERTER)),
    "org.apache.kafka.connect.converters.FloatConverter":
        (f"{_C}.number:FloatConverter", (PluginType.CONVERTER, PluginType.HEADER_CONVERTER)),
    "org.apache.kafka.connect.converters.DoubleConverter":
        (f"{_C}.number:DoubleConverter", (PluginType.CONVERTER, PluginType.HEADER_CONVERTER)),
    "io.confluent.connect.avro.AvroConverter": (f"{_C}.avro:AvroConverter", (PluginType.CONVERTER,)),
    "org.apache.kafka.connect.storage.SimpleHeaderConverter":
        (f"{_C}.simple_header:SimpleHeaderConverter", (PluginType.HEADER_CONVERTER,)),
    # transforms (each $Key/$Value pair, and the whole-record ones)
    **{f"{_K}{java}${side}": (f"{_T}.{module}:{java}{side}", (PluginType.TRANSFORMATION,))
       for java, module in (("InsertField", "insert_field"), ("ReplaceField", "replace_field"),
                            ("MaskField", "mask_field"), ("ExtractField", "extract_field"),
                            ("HoistField", "hoist_field"), ("Cast", "cast"),
                            ("TimestampConverter", "timestamp_converter"), ("Flatten", "flatten"),
                            ("SetSchemaMetadata", "set_schema_metadata"))
       for side in ("Key", "Value")},
    f"{_K}ValueToKey": (f"{_T}.value_to_key:ValueToKey", (PluginType.TRANSFORMATION,)),
    f"{_K}RegexRouter": (f"{_T}.regex_router:RegexRouter", (PluginType.TRANSFORMATION,)),
    f"{_K}TimestampRouter": (f"{_T}.timestamp_router:TimestampRouter", (PluginType.TRANSFORMATION,)),
    f"{_K}Filter": (f"{_T}.filter:Filter", (PluginType.TRANSFORMATION,)),
    # predicates
    f"{_K}predicates.TopicNameMatches": (f"{_T}.predicates:TopicNameMatches", (PluginType.PREDICATE,)),
    f"{_K}predicates.HasHeaderKey": (f"{_T}.predicates:HasHeaderKey", (PluginType.PREDICATE,)),
    f"{_K}predicates.RecordIsTombstone": (f"{_T}.predicates:RecordIsTombstone", (PluginType.PREDICATE,)),
}


def _simple_name(java_name: str) -> str:
    """Java's getSimpleName: after the last '.', and for a nested class after the last '$'."""
    return java_name.rsplit(".", 1)[-1].rsplit("$", 1)[-1]


def _pruned_name(java_name: str, kinds: tuple[PluginType, ...]) -> str:
    simple = _simple_name(java_name)
    if PluginType.CONNECTOR in kinds and simple.endswith("Connector"):
        return simple[: -len("Connector")]
    if (PluginType.CONVERTER in kinds or PluginType.HEADER_CONVERTER in kinds) and simple.endswith("Converter"):
        return simple[: -len("Converter")]
    return simple


def _build_aliases(table: dict[str, tuple[str, tuple[PluginType, ...]]]) -> dict[str, str]:
    """Kafka's addAliases: an alias is kept only when exactly one plugin claims it."""
    claims: dict[str, set[str]] = {}
    for java_name, (_, kinds) in table.items():
        for alias in {_simple_name(java_name), _pruned_name(java_name, kinds)}:
            claims.setdefault(alias, set()).add(java_name)
    return {alias: next(iter(names)) for alias, names in claims.items() if len(names) == 1}


_ALIASES = _build_aliases(BUILTIN)


def aliases() -> dict[str, str]:
    """Alias -> the fully-qualified Java name it stands for."""
    return dict(_ALIASES)


def _import(target: str) -> type:
    """``module:Qual.Name`` -> the class."""
    module_name, _, qualname = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(f"Failed to find any class that implements {target}: {exc}") from None
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise PluginError(f"Failed to find any class that implements {target}")
    if not isinstance(obj, type):
        raise PluginError(f"{target} is not a class")
    return obj


def _entry_points(groups: Iterable[str]) -> list[metadata.EntryPoint]:
    found: list[metadata.EntryPoint] = []
    for group in groups:
        found.extend(metadata.entry_points(group=group))
    return found


def resolve(name: str) -> str:
    """The ``module:Class`` target a configured name stands for (without importing it)."""
    name = name.strip()
    java = _ALIASES.get(name, name)
    if java in BUILTIN:
        return BUILTIN[java][0]
    for ep in _entry_points(ENTRY_POINT_GROUPS.values()):
        if name in (ep.name, ep.value, ep.value.replace(":", ".")):
            return ep.value
    if ":" in name:
        return name
    if "." in name:
        module, _, cls = name.rpartition(".")
        return f"{module}:{cls}"
    raise PluginError(f"Failed to find any class that implements {name}")


def load_class(name: str) -> type:
    """The class a configured name stands for; PluginError when none can be imported.

    A dotted name first tries the whole as ``module.Class``, then shorter module prefixes, so a
    class nested in a class (``pkg.mod.Outer.Inner``) resolves too.
    """
    target = resolve(name)
    try:
        return _import(target)
    except PluginError:
        if ":" in name or name.strip() in _ALIASES or name.strip() in BUILTIN:
            raise
        parts = name.strip().split(".")
        for cut in range(len(parts) - 2, 0, -1):
            try:
                return _import(".".join(parts[:cut]) + ":" + ".".join(parts[cut:]))
            except PluginError:
                continue
        raise


def plugin_type_of(cls: type) -> PluginType:
    from .connector import SinkConnector, SourceConnector
    if issubclass(cls, SourceConnector):
        return PluginType.SOURCE
    if issubclass(cls, SinkConnector):
        return PluginType.SINK
    return PluginType.UNKNOWN


def connector_plugins() -> list[dict[str, str]]:
    """The body of ``GET /connector-plugins``: every importable connector, sorted by class name.

    Built-in connectors are listed under their Java name (what Kafka users configure);
    entry-point connectors under their dotted Python name.
    """
    listed: dict[str, dict[str, str]] = {}
    candidates: list[tuple[str, str]] = [(java, target) for java, (target, kinds) in BUILTIN.items()
                                         if PluginType.CONNECTOR in kinds]
    candidates += [(ep.value.replace(":", "."), ep.value)
                   for ep in _entry_points([ENTRY_POINT_GROUPS[PluginType.CONNECTOR]])]
    for shown, target in candidates:
        try:
            cls = _import(target)
        except PluginError as exc:
            log.debug("connector plugin %s not available: %s", shown, exc)
            continue
        kind = plugin_type_of(cls)
        try:
            version = str(cls().version())
        except Exception:  # a plugin whose constructor needs more: still listed
            version = "undefined"
        listed[shown] = {"class": shown, "type": kind.value, "version": version}
    return [listed[name] for name in sorted(listed)]
