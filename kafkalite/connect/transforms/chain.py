"""The ``transforms``/``predicates`` connector configuration as a TransformationChain.

Kafka's ConnectorConfig reads ``transforms=a,b``, then per alias ``transforms.a.type`` (the
class), its own keys under ``transforms.a.``, and optionally ``transforms.a.predicate`` (an alias
listed in ``predicates``) with ``transforms.a.negate``; each predicate has ``predicates.p.type``
and its keys. ``enrich`` adds those keys to a connector's ConfigDef (the validate answer shows
them in groups "Transforms: a", "Predicates: p"); ``TransformationChain.from_config`` builds the
chain the runtime calls: ``chain.apply(record)`` returns the transformed record or None when a
stage dropped it. ``apply_with`` lets the runtime wrap each stage (retries, error tolerance).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from ..config import (
    AbstractConfig, ConfigDef, ConfigException, Importance, Type, Width,
)
from ..errors import ConnectException
from ..plugins import PluginError, load_class
from ..records import ConnectRecord
from .base import Predicate, Transformation

__all__ = ["TRANSFORMS_CONFIG", "PREDICATES_CONFIG", "transforms_config_def", "enrich", "PredicatedTransformation",
           "TransformationChain"]

TRANSFORMS_CONFIG = "transforms"
PREDICATES_CONFIG = "predicates"
TRANSFORMS_GROUP = "Transforms"
PREDICATES_GROUP = "Predicates"
PREDICATE_CONFIG = "predicate"
NEGATE_CONFIG = "negate"


class _UniqueAliases:
    def ensure_valid(self, name: str, value: Any) -> None:
        aliases = list(value or [])
        if len(aliases) != len(set(aliases)):
            raise ConfigException(name, ",".join(aliases), "Duplicate alias provided.")

    def __str__(self) -> str:
        return "unique transformation aliases"


def transforms_config_def(definition: ConfigDef | None = None) -> ConfigDef:
    """The ``transforms`` and ``predicates`` keys of Kafka's ConnectorConfig."""
    target = definition if definition is not None else ConfigDef()
    target.define(TRANSFORMS_CONFIG, Type.LIST, "", _UniqueAliases(), Importance.LOW,
                  "Aliases for the transformations to be applied to records.", TRANSFORMS_GROUP, 6, Width.LONG,
                  "Transforms")
    target.define(PREDICATES_CONFIG, Type.LIST, "", _UniqueAliases(), Importance.LOW,
                  "Aliases for the predicates used by transformations.", PREDICATES_GROUP, 7, Width.LONG,
                  "Predicates")
    return target


class _PluginClass:
    """Validator of a ``.type`` key: the class resolves and is of the expected kind."""

    def __init__(self, base: type, what: str) -> None:
        self.base = base
        self.what = what

    def ensure_valid(self, name: str, value: Any) -> None:
        if value is None:
            return
        try:
            cls = load_class(str(value))
        except PluginError:
            raise ConfigException(name, value, f"Class {value} could not be found.") from None
        if not issubclass(cls, self.base):
            raise ConfigException(name, value, f"Not a {self.what}")

    def __str__(self) -> str:
        return ""


def _aliases(props: Mapping[str, Any], key: str) -> list[str]:
    raw = props.get(key)
    if raw is None:
        return []
    if isinstance(raw, (list, tuple)):
        return [str(a) for a in raw]
    return [a.strip() for a in str(raw).split(",") if a.strip()]


def _plugin_def(props: Mapping[str, Any], prefix: str, base: type) -> ConfigDef | None:
    name = props.get(prefix + "type")
    if name is None:
        return None
    try:
        cls = load_class(str(name))
        if not issubclass(cls, base):
            return None
        plugin: Any = cls()
        definition = plugin.config()
        return definition if isinstance(definition, ConfigDef) else None
    except Exception:  # a class that cannot even be built: the .type key reports it
        return None


def enrich(definition: ConfigDef, props: Mapping[str, Any]) -> ConfigDef:
    """``definition`` plus every configured transformation's and predicate's keys (ConnectorConfig.enrich)."""
    out = ConfigDef(definition)
    if TRANSFORMS_CONFIG not in out:
        transforms_config_def(out)
    for alias in dict.fromkeys(_aliases(props, TRANSFORMS_CONFIG)):
        prefix, group = f"{TRANSFORMS_CONFIG}.{alias}.", f"Transforms: {alias}"
        out.define(prefix + "type", Type.CLASS, ConfigDef.NO_DEFAULT_VALUE, _PluginClass(Transformation,
                   "Transformation"), Importance.HIGH, f"Class for the '{alias}' transformation.", group, 0,
                   Width.LONG, f"Transformation type for {alias}")
        out.define(prefix + PREDICATE_CONFIG, Type.STRING, "", None, Importance.MEDIUM,
                   "The alias of a predicate used to determine whether to apply this transformation.", group, 1,
                   Width.LONG, f"Predicate for {alias}")
        out.define(prefix + NEGATE_CONFIG, Type.BOOLEAN, False, None, Importance.MEDIUM,
                   "Whether the configured predicate should be negated.", group, 2, Width.SHORT,
                   f"Negate for {alias}")
        child = _plugin_def(props, prefix, Transformation)
        if child is not None:
            out.embed(prefix, group, 3, _without(child, ("type", PREDICATE_CONFIG, NEGATE_CONFIG)))
    for alias in dict.fromkeys(_aliases(props, PREDICATES_CONFIG)):
        prefix, group = f"{PREDICATES_CONFIG}.{alias}.", f"Predicates: {alias}"
        out.define(prefix + "type", Type.CLASS, ConfigDef.NO_DEFAULT_VALUE, _PluginClass(Predicate, "Predicate"),
                   Importance.HIGH, f"Class for the '{alias}' predicate.", group, 0, Width.LONG,
                   f"Predicate type for {alias}")
        child = _plugin_def(props, prefix, Predicate)
        if child is not None:
            out.embed(prefix, group, 1, _without(child, ("type",)))
    return out


def _without(definition: ConfigDef, names: tuple[str, ...]) -> ConfigDef:
    out = ConfigDef()
    for key in definition.config_keys.values():
        if key.name not in names:
            out.define_key(key)
    return out


class PredicatedTransformation(Transformation):
    """A transformation applied only to records its predicate accepts (rejects, with negate)."""

    def __init__(self, predicate: Predicate, negate: bool, delegate: Transformation) -> None:
        self.predicate = predicate
        self.negate = negate
        self.delegate = delegate

    def config(self) -> ConfigDef:
        return self.delegate.config()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if self.negate ^ self.predicate.test(record):
            return self.delegate.apply(record)
        return record

    def close(self) -> None:
        self.delegate.close()
        self.predicate.close()

    def __repr__(self) -> str:
        return (f"PredicatedTransformation{{predicate={type(self.predicate).__name__}, negate={self.negate}, "
                f"transformation={type(self.delegate).__name__}}}")


Runner = Callable[[Callable[[], "ConnectRecord | None"], Transformation], "ConnectRecord | None"]


class TransformationChain:
    """The connector's transformations in order (Kafka's TransformationChain)."""

    def __init__(self, transformations: list[Transformation] | None = None) -> None:
        self.transformations = list(transformations or [])

    @classmethod
    def from_config(cls, props: Mapping[str, Any]) -> "TransformationChain":
        """Build and configure every transformation; ConfigException names the bad key."""
        parsed = AbstractConfig(enrich(ConfigDef(), props), props)
        predicates = set(parsed.get(PREDICATES_CONFIG))
        stages: list[Transformation] = []
        try:
            for alias in parsed.get(TRANSFORMS_CONFIG):
                prefix = f"{TRANSFORMS_CONFIG}.{alias}."
                transformation = _new(parsed.get(prefix + "type"), Transformation)
                configs = parsed.originals_with_prefix(prefix)
                predicate_alias = configs.pop(PREDICATE_CONFIG, None) or None
                negate = str(configs.pop(NEGATE_CONFIG, "false")).strip().lower() == "true"
                transformation.configure(configs)
                if predicate_alias is None:
                    stages.append(transformation)
                    continue
                if predicate_alias not in predicates:
                    raise ConfigException(prefix + PREDICATE_CONFIG, predicate_alias,
                                          f"not one of the aliases in {PREDICATES_CONFIG}")
                predicate_prefix = f"{PREDICATES_CONFIG}.{predicate_alias}."
                predicate = _new(parsed.get(predicate_prefix + "type"), Predicate)
                predicate.configure(parsed.originals_with_prefix(predicate_prefix))
                stages.append(PredicatedTransformation(predicate, negate, transformation))
        except BaseException:
            for stage in stages:
                stage.close()
            raise
        return cls(stages)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        current: ConnectRecord | None = record
        for transformation in self.transformations:
            if current is None:
                return None
            current = transformation.apply(current)
        return current

    def apply_with(self, record: ConnectRecord, runner: Runner) -> ConnectRecord | None:
        """Like apply, each stage run through ``runner(stage, transformation)`` (the runtime's
        RetryWithToleranceOperator.execute); a None from the runner ends the chain."""
        current: ConnectRecord | None = record
        for transformation in self.transformations:
            if current is None:
                return None
            source = current
            current = runner(lambda t=transformation, r=source: t.apply(r), transformation)  # type: ignore[misc]
        return current

    def close(self) -> None:
        for transformation in self.transformations:
            transformation.close()

    def __len__(self) -> int:
        return len(self.transformations)


def _new(class_name: str, base: type) -> Any:
    try:
        cls = load_class(class_name)
    except PluginError as exc:
        raise ConfigException(f"Class {class_name} could not be found: {exc}") from None
    if not issubclass(cls, base):
        raise ConfigException(f"{class_name} is not a {base.__name__}")
    try:
        return cls()
    except Exception as exc:
        raise ConnectException(f"Failed to instantiate {class_name}: {exc}") from exc
