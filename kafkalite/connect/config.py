"""Kafka's ConfigDef (org.apache.kafka.common.config): typed, documented, validated configuration.

Connectors, converters and transforms declare their properties here; ``parse`` turns the string
properties a user gives into typed values with Kafka's error messages, ``validate`` collects every
problem at once (for ``PUT /connector-plugins/{plugin}/config/validate``), and ``config_infos``
shapes that answer exactly as Kafka's AbstractHerder.generateResult does (ConfigInfos JSON).
"""
from __future__ import annotations

import enum
import re
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from .errors import ConfigException

__all__ = [
    "ConfigDef", "ConfigKey", "ConfigValue", "Config", "Type", "Importance", "Width", "Password",
    "NO_DEFAULT_VALUE", "Validator", "Recommender", "Range", "ValidString", "CaseInsensitiveValidString",
    "ValidList", "NonEmptyString", "NonNullValidator", "NonEmptyStringWithoutControlChars",
    "CompositeValidator", "LambdaValidator", "AbstractConfig", "config_infos", "convert_to_string",
]


class Type(enum.Enum):
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"

    def __str__(self) -> str:
        return self.name


class Importance(enum.Enum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Width(enum.Enum):
    NONE = "NONE"
    SHORT = "SHORT"
    MEDIUM = "MEDIUM"
    LONG = "LONG"


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT_VALUE"


#: A key defined with this default is required.
NO_DEFAULT_VALUE: Any = _NoDefault()


class Password:
    """A secret: printed as ``[hidden]`` (in logs and the validate answer), ``value`` holds it."""

    HIDDEN = "[hidden]"

    def __init__(self, value: str) -> None:
        self.value = value

    def __str__(self) -> str:
        return self.HIDDEN

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


# -- validators -------------------------------------------------------------------------------
class Validator(Protocol):
    def ensure_valid(self, name: str, value: Any) -> None: ...


class Recommender(Protocol):
    def valid_values(self, name: str, parsed: Mapping[str, Any]) -> list[Any]: ...

    def visible(self, name: str, parsed: Mapping[str, Any]) -> bool: ...


def _java(value: Any) -> str:
    """A value as Java's toString would print it in messages (true/false, lists as [a, b])."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_java(v) for v in value) + "]"
    if value is None:
        return "null"
    return str(value)


class Range:
    """A number in [min, max]; either bound may be None."""

    def __init__(self, min: float | None = None, max: float | None = None) -> None:
        self.min = min
        self.max = max

    @staticmethod
    def at_least(min: float) -> "Range":
        return Range(min, None)

    @staticmethod
    def between(min: float, max: float) -> "Range":
        return Range(min, max)

    def ensure_valid(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigException(name, _java(value), "Value must be non-null")
        if self.min is not None and value < self.min:
            raise ConfigException(name, _java(value), f"Value must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise ConfigException(name, _java(value), f"Value must be no more than {self.max}")

    def __str__(self) -> str:
        if self.min is None and self.max is None:
            return "[...]"
        if self.min is None:
            return f"[...,{self.max}]"
        if self.max is None:
            return f"[{self.min},...]"
        return f"[{self.min},...,{self.max}]"


class ValidString:
    def __init__(self, valid: Sequence[str | None]) -> None:
        self.valid = list(valid)

    @staticmethod
    def in_(*valid: str | None) -> "ValidString":
        return ValidString(valid)

    def ensure_valid(self, name: str, value: Any) -> None:
        if value not in self.valid:
            raise ConfigException(name, _java(value), "String must be one of: " + ", ".join(map(_java, self.valid)))

    def __str__(self) -> str:
        return "[" + ", ".join(map(_java, self.valid)) + "]"


class CaseInsensitiveValidString:
    def __init__(self, valid: Sequence[str]) -> None:
        self.valid = list(valid)
        self._upper = {v.upper() for v in valid}

    @staticmethod
    def in_(*valid: str) -> "CaseInsensitiveValidString":
        return CaseInsensitiveValidString(valid)

    def ensure_valid(self, name: str, value: Any) -> None:
        if value is None or str(value).upper() not in self._upper:
            raise ConfigException(name, _java(value), "String must be one of (case insensitive): "
                                  + ", ".join(self.valid))

    def __str__(self) -> str:
        return "(case insensitive) [" + ", ".join(self.valid) + "]"


class ValidList:
    """Every element of a LIST is one of the valid strings."""

    def __init__(self, valid: Sequence[str]) -> None:
        self.valid_string = ValidString(valid)

    @staticmethod
    def in_(*valid: str) -> "ValidList":
        return ValidList(valid)

    def ensure_valid(self, name: str, value: Any) -> None:
        for item in value or ():
            self.valid_string.ensure_valid(name, item)

    def __str__(self) -> str:
        return str(self.valid_string)


class NonEmptyString:
    def ensure_valid(self, name: str, value: Any) -> None:
        if value is not None and value == "":
            raise ConfigException(name, value, "String must be non-empty")

    def __str__(self) -> str:
        return "non-empty string"


class NonNullValidator:
    def ensure_valid(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigException(name, _java(value), "Entry must be non null")

    def __str__(self) -> str:
        return "non-null string"


class NonEmptyStringWithoutControlChars:
    def ensure_valid(self, name: str, value: Any) -> None:
        if value is None:
            return
        if value == "":
            raise ConfigException(name, value, "String may not be empty")
        controls = [ord(c) for c in value if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F]
        if controls:
            raise ConfigException(name, value, "String may not contain control sequences but had the "
                                  "following ASCII chars: " + ", ".join(map(str, controls)))

    def __str__(self) -> str:
        return "non-empty string without ISO control characters"


class CompositeValidator:
    def __init__(self, validators: Sequence[Validator]) -> None:
        self.validators = list(validators)

    @staticmethod
    def of(*validators: Validator) -> "CompositeValidator":
        return CompositeValidator(validators)

    def ensure_valid(self, name: str, value: Any) -> None:
        for validator in self.validators:
            validator.ensure_valid(name, value)

    def __str__(self) -> str:
        return ", ".join(str(v) for v in self.validators)


class LambdaValidator:
    """A validator from a function, with the text the documentation shows (Kafka's LambdaValidator.with)."""

    def __init__(self, check: Callable[[str, Any], None], text: Callable[[], str] | str) -> None:
        self._check = check
        self._text = text

    @staticmethod
    def with_(check: Callable[[str, Any], None], text: Callable[[], str] | str) -> "LambdaValidator":
        return LambdaValidator(check, text)

    def ensure_valid(self, name: str, value: Any) -> None:
        self._check(name, value)

    def __str__(self) -> str:
        return self._text() if callable(self._text) else self._text


# -- keys and values --------------------------------------------------------------------------
class ConfigKey:
    __slots__ = ("name", "type", "default_value", "validator", "importance", "documentation", "group",
                 "order_in_group", "width", "display_name", "dependents", "recommender", "internal_config")

    def __init__(self, name: str, type: Type, default_value: Any, validator: Validator | None,
                 importance: Importance | None, documentation: str | None, group: str | None,
                 order_in_group: int, width: Width, display_name: str, dependents: Sequence[str],
                 recommender: Recommender | None, internal_config: bool) -> None:
        self.name = name
        self.type = type
        self.default_value = default_value
        self.validator = validator
        self.importance = importance
        self.documentation = documentation
        self.group = group
        self.order_in_group = order_in_group
        self.width = width
        self.display_name = display_name
        self.dependents = list(dependents)
        self.recommender = recommender
        self.internal_config = internal_config

    @property
    def has_default(self) -> bool:
        return self.default_value is not NO_DEFAULT_VALUE


class ConfigValue:
    """One key's outcome of ConfigDef.validate: value, recommendations, errors, visibility."""

    def __init__(self, name: str, value: Any = None, recommended_values: list[Any] | None = None,
                 error_messages: list[str] | None = None, visible: bool = True) -> None:
        self.name = name
        self.value = value
        self.recommended_values = list(recommended_values or [])
        self.error_messages = list(error_messages or [])
        self.visible = visible

    def add_error_message(self, message: str) -> None:
        self.error_messages.append(message)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ConfigValue) and (self.name, self.value, self.recommended_values,
                self.error_messages, self.visible) == (other.name, other.value, other.recommended_values,
                                                       other.error_messages, other.visible))

    def __repr__(self) -> str:
        return (f"[{self.name},{self.value},{self.recommended_values},{self.error_messages},"
                f"{str(self.visible).lower()}]")


class Config:
    """The result of Connector.validate: the ConfigValues of its keys."""

    def __init__(self, config_values: list[ConfigValue]) -> None:
        self.config_values = config_values


_SPLIT = re.compile(r"\s*,\s*")
_INT_BOUNDS = {Type.SHORT: (-(1 << 15), (1 << 15) - 1, "a short"),
               Type.INT: (-(1 << 31), (1 << 31) - 1, "an integer"),
               Type.LONG: (-(1 << 63), (1 << 63) - 1, "a long")}


def parse_type(name: str, value: Any, type: Type) -> Any:
    """One value as its type (Kafka's ConfigDef.parseType), raising its ConfigExceptions."""
    if value is None:
        return None
    trimmed = value.strip() if isinstance(value, str) else None
    if type is Type.BOOLEAN:
        if isinstance(value, bool):
            return value
        if trimmed is not None:
            if trimmed.lower() == "true":
                return True
            if trimmed.lower() == "false":
                return False
        raise ConfigException(name, _java(value), "Expected value to be either true or false")
    if type is Type.PASSWORD:
        if isinstance(value, Password):
            return value
        if isinstance(value, str):
            return Password(trimmed or "")
        raise ConfigException(name, value, "Expected value to be a string, but it was a " + _java_class(value))
    if type is Type.STRING:
        if isinstance(value, str):
            return trimmed
        raise ConfigException(name, value, "Expected value to be a string, but it was a " + _java_class(value))
    if type in _INT_BOUNDS:
        low, high, words = _INT_BOUNDS[type]
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif trimmed is not None:
            try:
                number = int(trimmed)
            except ValueError:
                raise ConfigException(name, value, f"Not a number of type {type}") from None
        else:
            raise ConfigException(name, _java(value), f"Expected value to be {words}, but it was a "
                                  + _java_class(value))
        if not low <= number <= high:
            raise ConfigException(name, value, f"Not a number of type {type}")
        return number
    if type is Type.DOUBLE:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if trimmed is not None:
            try:
                return float(trimmed)
            except ValueError:
                raise ConfigException(name, value, f"Not a number of type {type}") from None
        raise ConfigException(name, _java(value), "Expected value to be a double, but it was a " + _java_class(value))
    if type is Type.LIST:
        if isinstance(value, (list, tuple)):
            return list(value)
        if trimmed is not None:
            return [] if trimmed == "" else _SPLIT.split(trimmed)
        raise ConfigException(name, value, "Expected a comma separated list.")
    if type is Type.CLASS:
        if isinstance(value, type_):
            return f"{value.__module__}:{value.__qualname__}"
        if trimmed is None:
            raise ConfigException(name, value, "Expected a Class instance or class name.")
        from .plugins import PluginError, load_class
        try:
            load_class(trimmed)
        except PluginError:
            raise ConfigException(name, value, f"Class {trimmed} could not be found.") from None
        return trimmed
    raise ConfigException("Unknown type.")


type_ = type


def _java_class(value: Any) -> str:
    return {bool: "java.lang.Boolean", int: "java.lang.Integer", float: "java.lang.Double",
            str: "java.lang.String", list: "java.util.List"}.get(type_(value), type_(value).__name__)


def convert_to_string(value: Any, type: Type | None) -> str | None:
    """A parsed value as Kafka's ConfigDef.convertToString prints it (the validate answer's strings)."""
    if value is None or value is NO_DEFAULT_VALUE:
        return None
    if type is Type.LIST or (type is None and isinstance(value, (list, tuple))):
        if isinstance(value, (list, tuple)):
            return ",".join(_java(v) for v in value)
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if value != int(value) or abs(value) >= 1e7 else f"{value:.1f}"
    return str(value)


class ConfigDef:
    """An ordered set of ConfigKeys (Kafka's ConfigDef)."""

    NO_DEFAULT_VALUE = NO_DEFAULT_VALUE

    def __init__(self, base: "ConfigDef | None" = None) -> None:
        self._keys: dict[str, ConfigKey] = dict(base._keys) if base is not None else {}
        self._groups: list[str] = list(base._groups) if base is not None else []

    def define(self, name: str, type: Type, default_value: Any = NO_DEFAULT_VALUE,
               validator: Validator | None = None, importance: Importance | None = Importance.MEDIUM,
               documentation: str | None = "", group: str | None = None, order_in_group: int = -1,
               width: Width = Width.NONE, display_name: str | None = None, dependents: Sequence[str] = (),
               recommender: Recommender | None = None, internal_config: bool = False) -> "ConfigDef":
        """Add a key; the default is parsed and validated now so a bad definition fails at import."""
        if name in self._keys:
            raise ConfigException(f"Configuration {name} is defined twice.")
        if group is not None and group not in self._groups:
            self._groups.append(group)
        parsed_default = default_value if default_value is NO_DEFAULT_VALUE else parse_type(name, default_value, type)
        if validator is not None and parsed_default is not NO_DEFAULT_VALUE:
            validator.ensure_valid(name, parsed_default)
        self._keys[name] = ConfigKey(name, type, parsed_default, validator, importance, documentation, group,
                                     order_in_group, width, display_name if display_name is not None else name,
                                     dependents, recommender, internal_config)
        return self

    def define_internal(self, name: str, type: Type, default_value: Any = NO_DEFAULT_VALUE,
                        importance: Importance = Importance.LOW) -> "ConfigDef":
        return self.define(name, type, default_value, None, importance, "", internal_config=True)

    def define_key(self, key: ConfigKey) -> "ConfigDef":
        if key.name in self._keys:
            raise ConfigException(f"Configuration {key.name} is defined twice.")
        if key.group is not None and key.group not in self._groups:
            self._groups.append(key.group)
        self._keys[key.name] = key
        return self

    @property
    def config_keys(self) -> dict[str, ConfigKey]:
        return dict(self._keys)

    def names(self) -> list[str]:
        return list(self._keys)

    def groups(self) -> list[str]:
        return list(self._groups)

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    def embed(self, prefix: str, group: str, starting_ord: int, child: "ConfigDef") -> "ConfigDef":
        """Kafka's ConfigDef.embed: the child's keys under ``prefix`` in ``group`` (transform configs)."""
        order = starting_ord
        for key in child._keys.values():
            self.define_key(ConfigKey(prefix + key.name, key.type, key.default_value,
                                      _EmbeddedValidator(prefix, key.validator) if key.validator else None,
                                      key.importance, key.documentation, group, order, key.width,
                                      key.display_name, [prefix + d for d in key.dependents],
                                      _EmbeddedRecommender(prefix, key.recommender) if key.recommender else None,
                                      key.internal_config))
            order += 1
        return self

    # -- parsing -----------------------------------------------------------------------------
    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Every defined key as a typed value; unknown keys are ignored, as Kafka's parse does."""
        undefined = self._undefined_dependents()
        if undefined:
            raise ConfigException("Some configurations in are referred in the dependents, but not defined: "
                                  + ",".join(undefined))
        values: dict[str, Any] = {}
        for key in self._keys.values():
            if key.name in props:
                value = parse_type(key.name, props[key.name], key.type)
            elif not key.has_default:
                raise ConfigException(f'Missing required configuration "{key.name}" which has no default value.')
            else:
                value = key.default_value
            if key.validator is not None:
                key.validator.ensure_valid(key.name, value)
            values[key.name] = value
        return values

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        """Every key's ConfigValue with all of its errors (Kafka's ConfigDef.validate), in definition order."""
        results = {name: ConfigValue(name) for name in self._keys}
        parsed: dict[str, Any] = {}
        for key in self._keys.values():
            value: Any = None
            config_value = results[key.name]
            if key.name in props:
                try:
                    value = parse_type(key.name, props[key.name], key.type)
                except ConfigException as exc:
                    config_value.add_error_message(str(exc))
            elif not key.has_default:
                config_value.add_error_message(
                    f'Missing required configuration "{key.name}" which has no default value.')
            else:
                value = key.default_value
            if key.validator is not None:
                try:
                    key.validator.ensure_valid(key.name, value)
                except ConfigException as exc:
                    config_value.add_error_message(str(exc))
                except (TypeError, ValueError) as exc:  # a validator meeting an unparsed None
                    if not config_value.error_messages:
                        config_value.add_error_message(str(exc))
            config_value.value = value
            parsed[key.name] = value
        for key in self._keys.values():
            if key.recommender is None:
                continue
            config_value = results[key.name]
            try:
                config_value.recommended_values = list(key.recommender.valid_values(key.name, parsed))
                config_value.visible = key.recommender.visible(key.name, parsed)
            except ConfigException as exc:
                config_value.add_error_message(str(exc))
        for name in self._undefined_dependents():
            results[name] = ConfigValue(name, None, [], [f"{name} is referred in the dependents, but not defined."],
                                        False)
        return list(results.values())

    def _undefined_dependents(self) -> list[str]:
        return sorted({d for key in self._keys.values() for d in key.dependents if d not in self._keys})

    # -- documentation -----------------------------------------------------------------------
    def to_rst(self) -> str:
        """The keys as Kafka's generated documentation lists them (name, doc, type, default, valid values)."""
        out: list[str] = []
        for key in self._sorted_keys():
            out.append(f"``{key.name}``")
            out.append(f"  {key.documentation or ''}")
            out.append("")
            out.append(f"  * Type: {key.type.name.lower()}")
            if key.has_default:
                out.append(f"  * Default: {convert_to_string(key.default_value, key.type) or ''}")
            if key.validator is not None:
                out.append(f"  * Valid Values: {key.validator}")
            if key.importance is not None:
                out.append(f"  * Importance: {key.importance.name.lower()}")
            out.append("")
        return "\n".join(out)

    def to_markdown_table(self) -> str:
        """A Markdown table of the keys (docs/connect-plugins.md is written from these)."""
        rows = ["| Name | Type | Default | Valid values | Importance | Description |",
                "|---|---|---|---|---|---|"]
        for key in self._sorted_keys():
            default = convert_to_string(key.default_value, key.type) if key.has_default else None
            shown = "(required)" if not key.has_default else ('""' if default == "" else f"`{default}`"
                                                             if default is not None else "null")
            rows.append(f"| `{key.name}` | {key.type.name.lower()} | {shown} | {key.validator or ''} | "
                        f"{key.importance.name.lower() if key.importance else ''} | "
                        f"{(key.documentation or '').replace('|', '/').replace(chr(10), ' ')} |")
        return "\n".join(rows)

    def _sorted_keys(self) -> list[ConfigKey]:
        """Kafka's documentation order: required first, then by importance, then by name."""
        order = {Importance.HIGH: 0, Importance.MEDIUM: 1, Importance.LOW: 2, None: 3}
        return sorted((k for k in self._keys.values() if not k.internal_config),
                      key=lambda k: (k.has_default, order[k.importance], k.name))


class _EmbeddedValidator:
    def __init__(self, prefix: str, inner: Validator) -> None:
        self.prefix = prefix
        self.inner = inner

    def ensure_valid(self, name: str, value: Any) -> None:
        self.inner.ensure_valid(name[len(self.prefix):] if name.startswith(self.prefix) else name, value)

    def __str__(self) -> str:
        return str(self.inner)


class _EmbeddedRecommender:
    def __init__(self, prefix: str, inner: Recommender) -> None:
        self.prefix = prefix
        self.inner = inner

    def _unprefixed(self, parsed: Mapping[str, Any]) -> dict[str, Any]:
        return {k[len(self.prefix):]: v for k, v in parsed.items() if k.startswith(self.prefix)}

    def valid_values(self, name: str, parsed: Mapping[str, Any]) -> list[Any]:
        return self.inner.valid_values(name[len(self.prefix):], self._unprefixed(parsed))

    def visible(self, name: str, parsed: Mapping[str, Any]) -> bool:
        return self.inner.visible(name[len(self.prefix):], self._unprefixed(parsed))


class AbstractConfig:
    """Parsed values plus the originals (Kafka's AbstractConfig), for plugins that read sub-configs."""

    def __init__(self, definition: ConfigDef, originals: Mapping[str, Any]) -> None:
        self.definition = definition
        self.originals: dict[str, Any] = dict(originals)
        self.values = definition.parse(originals)

    def get(self, name: str) -> Any:
        if name not in self.values:
            raise ConfigException(f"Unknown configuration '{name}'")
        return self.values[name]

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def get_password(self, name: str) -> str | None:
        value = self.get(name)
        return value.value if isinstance(value, Password) else value

    def originals_with_prefix(self, prefix: str, strip: bool = True) -> dict[str, Any]:
        return {(k[len(prefix):] if strip else k): v for k, v in self.originals.items() if k.startswith(prefix)}

    def originals_strings(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.originals.items()}


# -- the validate answer ----------------------------------------------------------------------
def _key_info(key: ConfigKey) -> dict[str, Any]:
    return {
        "name": key.name,
        "type": key.type.name,
        "required": not key.has_default,
        "default_value": None if not key.has_default else convert_to_string(key.default_value, key.type),
        "importance": key.importance.name if key.importance is not None else None,
        "documentation": key.documentation,
        "group": key.group,
        "width": key.width.name,
        "display_name": key.display_name,
        "dependents": list(key.dependents),
        "order": key.order_in_group,
    }


def _value_info(value: ConfigValue, type: Type | None) -> dict[str, Any]:
    element_type = Type.STRING if type is Type.LIST else type
    return {
        "name": value.name,
        "value": convert_to_string(value.value, type),
        "recommended_values": [convert_to_string(v, element_type) for v in value.recommended_values],
        "errors": list(value.error_messages),
        "visible": value.visible,
    }


def config_infos(connector_type: str, config_keys: Mapping[str, ConfigKey] | ConfigDef,
                 config_values: Iterable[ConfigValue], groups: Sequence[str] | None = None) -> dict[str, Any]:
    """The JSON body of ``PUT /connector-plugins/{plugin}/config/validate`` (Kafka's ConfigInfos).

    Values without a key come first with a null definition (a connector's validate() may report
    keys its ConfigDef lacks), then every key in definition order; error_count sums every error.
    """
    if isinstance(config_keys, ConfigDef):
        if groups is None:
            groups = config_keys.groups()
        config_keys = config_keys.config_keys
    error_count = 0
    configs: list[dict[str, Any]] = []
    by_name: dict[str, ConfigValue] = {}
    for value in config_values:
        by_name[value.name] = value
        if value.name not in config_keys:
            configs.append({"definition": None, "value": _value_info(value, None)})
            error_count += len(value.error_messages)
    for name, key in config_keys.items():
        info: dict[str, Any] | None = None
        if name in by_name:
            info = _value_info(by_name[name], key.type)
            error_count += len(by_name[name].error_messages)
        configs.append({"definition": _key_info(key), "value": info})
    return {"name": connector_type, "error_count": error_count, "groups": list(groups or []), "configs": configs}
