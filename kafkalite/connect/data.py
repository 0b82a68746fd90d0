"""Connect's data model (Kafka's org.apache.kafka.connect.data): schemas, structs, logical types.

A Schema is immutable and compared by value, as Kafka's ConnectSchema; a SchemaBuilder builds one
fluently and refuses to set a property twice. Values are plain Python objects, checked against
their schema by ``validate``:

====================  =========================================
schema type           Python value
====================  =========================================
INT8..INT64           int (within the type's range, never bool)
FLOAT32, FLOAT64      float (an int is accepted too)
BOOLEAN               bool
STRING                str
BYTES                 bytes / bytearray / memoryview
ARRAY                 list (or tuple)
MAP                   dict
STRUCT                Struct whose schema equals the field's schema
Decimal (BYTES)       decimal.Decimal
Date (INT32)          datetime.date (midnight, no time part)
Time (INT32)          datetime.time
Timestamp (INT64)     datetime.datetime (naive means UTC)
====================  =========================================

The logical types keep Kafka's names (org.apache.kafka.connect.data.Decimal...) and wire
representations (unscaled two's-complement bytes, days since the epoch, milliseconds since
midnight, milliseconds since the epoch), so converters and other systems read them as Kafka's do.
"""
from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import enum
from typing import Any, Iterable, Iterator, Mapping, NamedTuple

from .errors import DataException, SchemaBuilderException

__all__ = [
    "Type", "Schema", "SchemaBuilder", "Field", "Struct", "SchemaAndValue", "Decimal", "Date", "Time",
    "Timestamp", "validate", "validate_value", "copy_schema_basics",
]


class Type(enum.Enum):
    """A schema's type; ``value`` is Kafka's Type.getName()."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        return self is not Type.ARRAY and self is not Type.MAP and self is not Type.STRUCT

    @property
    def is_integer(self) -> bool:
        return self in _INT_RANGES

    def __str__(self) -> str:
        return self.name

    # members are singletons: identity hashing keeps the per-value type checks off Enum's
    # Python-level __hash__ (they run for every field of every record)
    __hash__ = object.__hash__


_INT_RANGES = {
    Type.INT8: (-(1 << 7), (1 << 7) - 1), Type.INT16: (-(1 << 15), (1 << 15) - 1),
    Type.INT32: (-(1 << 31), (1 << 31) - 1), Type.INT64: (-(1 << 63), (1 << 63) - 1),
}


class Field:
    """A named, indexed member of a struct schema."""

    __slots__ = ("name", "index", "schema")

    def __init__(self, name: str, index: int, schema: "Schema") -> None:
        self.name = name
        self.index = index
        self.schema = schema

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Field) and self.name == other.name and self.index == other.index
                and self.schema == other.schema)

    def __hash__(self) -> int:
        return hash((self.name, self.index))

    def __repr__(self) -> str:
        return f"Field{{name={self.name}, index={self.index}, schema={self.schema}}}"


class Schema:
    """An immutable Connect schema (Kafka's ConnectSchema).

    ``fields``/``field()`` exist only on STRUCT, ``key_schema`` only on MAP, ``value_schema`` on
    MAP and ARRAY; asking another type raises DataException as Kafka does, so a bug surfaces where
    it is made.
    """

    __slots__ = ("type", "optional", "default", "name", "version", "doc", "parameters", "_fields",
                 "_fields_by_name", "_key_schema", "_value_schema", "_hash")

    def __init__(self, type: Type, optional: bool = False, default: Any = None, name: str | None = None,
                 version: int | None = None, doc: str | None = None,
                 parameters: Mapping[str, str] | None = None, fields: Iterable[Field] | None = None,
                 key_schema: "Schema | None" = None, value_schema: "Schema | None" = None) -> None:
        self.type = type
        self.optional = optional
        self.default = default
        self.name = name
        self.version = version
        self.doc = doc
        self.parameters: dict[str, str] | None = dict(parameters) if parameters is not None else None
        if type is Type.STRUCT:
            self._fields: list[Field] | None = list(fields or ())
            self._fields_by_name: dict[str, Field] = {f.name: f for f in self._fields}
        else:
            self._fields = None
            self._fields_by_name = {}
        self._key_schema = key_schema
        self._value_schema = value_schema
        self._hash: int | None = None

    # -- structure ---------------------------------------------------------------------------
    @property
    def fields(self) -> list[Field]:
        if self._fields is None:
            raise DataException("Cannot list fields on non-struct type")
        return list(self._fields)

    def field(self, name: str) -> Field | None:
        if self._fields is None:
            raise DataException("Cannot look up fields on non-struct type")
        return self._fields_by_name.get(name)

    @property
    def key_schema(self) -> "Schema":
        if self.type is not Type.MAP or self._key_schema is None:
            raise DataException("Cannot look up key schema on non-map type")
        return self._key_schema

    @property
    def value_schema(self) -> "Schema":
        if self.type not in (Type.MAP, Type.ARRAY) or self._value_schema is None:
            raise DataException("Cannot look up value schema on non-array and non-map type")
        return self._value_schema

    def schema(self) -> "Schema":
        return self

    # -- identity ----------------------------------------------------------------------------
    def _key(self) -> tuple[Any, ...]:
        return (self.type, self.optional, _freeze(self.default), self.name, self.version, self.doc,
                _freeze(self.parameters), tuple(self._fields) if self._fields is not None else None,
                self._key_schema, self._value_schema)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Schema):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((self.type, self.optional, self.name, self.version,
                               tuple(f.name for f in self._fields) if self._fields is not None else None))
        return self._hash

    def __repr__(self) -> str:
        if self.name is not None:
            return f"Schema{{{self.name}:{self.type}}}"
        return f"Schema{{{self.type}}}"


def _freeze(value: Any) -> Any:
    """A hashable, comparable stand-in for a default value or a parameter map."""
    if isinstance(value, dict):
        return tuple(sorted(((_freeze(k), _freeze(v)) for k, v in value.items()), key=repr))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, Struct):
        return ("Struct", value.schema, tuple(_freeze(value.get_without_default(f.name))
                                             for f in value.schema.fields))
    return value


# -- predefined schemas (Kafka's Schema.*_SCHEMA) ---------------------------------------------
INT8_SCHEMA = Schema(Type.INT8)
INT16_SCHEMA = Schema(Type.INT16)
INT32_SCHEMA = Schema(Type.INT32)
INT64_SCHEMA = Schema(Type.INT64)
FLOAT32_SCHEMA = Schema(Type.FLOAT32)
FLOAT64_SCHEMA = Schema(Type.FLOAT64)
BOOLEAN_SCHEMA = Schema(Type.BOOLEAN)
STRING_SCHEMA = Schema(Type.STRING)
BYTES_SCHEMA = Schema(Type.BYTES)
OPTIONAL_INT8_SCHEMA = Schema(Type.INT8, optional=True)
OPTIONAL_INT16_SCHEMA = Schema(Type.INT16, optional=True)
OPTIONAL_INT32_SCHEMA = Schema(Type.INT32, optional=True)
OPTIONAL_INT64_SCHEMA = Schema(Type.INT64, optional=True)
OPTIONAL_FLOAT32_SCHEMA = Schema(Type.FLOAT32, optional=True)
OPTIONAL_FLOAT64_SCHEMA = Schema(Type.FLOAT64, optional=True)
OPTIONAL_BOOLEAN_SCHEMA = Schema(Type.BOOLEAN, optional=True)
OPTIONAL_STRING_SCHEMA = Schema(Type.STRING, optional=True)
OPTIONAL_BYTES_SCHEMA = Schema(Type.BYTES, optional=True)

_PRIMITIVES = {
    (t, opt): Schema(t, optional=opt) for t in Type if t.is_primitive for opt in (False, True)
}


def primitive_schema(type: Type, optional: bool = False) -> Schema:
    """The predefined schema of a primitive type."""
    return _PRIMITIVES[(type, optional)]


class SchemaBuilder:
    """Builds a Schema fluently, as Kafka's SchemaBuilder: each property may be set once."""

    def __init__(self, type: Type) -> None:
        self.type = type
        self.optional_: bool | None = None
        self.default_: Any = None
        self._default_set = False
        self.name_: str | None = None
        self.version_: int | None = None
        self.doc_: str | None = None
        self.parameters_: dict[str, str] | None = None
        self.fields_: dict[str, Field] | None = {} if type is Type.STRUCT else None
        self.key_schema_: Schema | None = None
        self.value_schema_: Schema | None = None

    @staticmethod
    def _check_unset(field: str, current: Any) -> None:
        if current is not None:
            raise SchemaBuilderException(f"Invalid SchemaBuilder call: {field} has already been set.")

    # -- properties --------------------------------------------------------------------------
    def optional(self) -> "SchemaBuilder":
        self._check_unset("optional", self.optional_)
        self.optional_ = True
        return self

    def required(self) -> "SchemaBuilder":
        self._check_unset("optional", self.optional_)
        self.optional_ = False
        return self

    @property
    def is_optional(self) -> bool:
        return bool(self.optional_)

    def default_value(self, value: Any) -> "SchemaBuilder":
        if self._default_set:
            raise SchemaBuilderException("Invalid SchemaBuilder call: default has already been set.")
        try:
            validate_value(self._peek(), value)
        except DataException as exc:
            raise SchemaBuilderException(f"Invalid default value: {exc}") from exc
        self.default_ = value
        self._default_set = True
        return self

    def name(self, name: str | None) -> "SchemaBuilder":
        self._check_unset("name", self.name_)
        self.name_ = name
        return self

    def version(self, version: int | None) -> "SchemaBuilder":
        self._check_unset("version", self.version_)
        self.version_ = version
        return self

    def doc(self, doc: str | None) -> "SchemaBuilder":
        self._check_unset("doc", self.doc_)
        self.doc_ = doc
        return self

    def parameter(self, name: str, value: str) -> "SchemaBuilder":
        if self.parameters_ is None:
            self.parameters_ = {}
        self.parameters_[name] = value
        return self

    def parameters(self, params: Mapping[str, str]) -> "SchemaBuilder":
        if self.parameters_ is None:
            self.parameters_ = {}
        self.parameters_.update(params)
        return self

    def field(self, name: str, schema: "Schema | SchemaBuilder") -> "SchemaBuilder":
        if self.fields_ is None:
            raise SchemaBuilderException("Cannot create fields on type " + str(self.type))
        if not name:
            raise SchemaBuilderException("fieldName cannot be null.")
        if schema is None:
            raise SchemaBuilderException("fieldSchema for field " + name + " cannot be null.")
        if name in self.fields_:
            raise SchemaBuilderException("Cannot create field because of field name duplication " + name)
        built = schema.build() if isinstance(schema, SchemaBuilder) else schema
        self.fields_[name] = Field(name, len(self.fields_), built)
        return self

    @property
    def fields(self) -> list[Field]:
        if self.fields_ is None:
            raise DataException("Cannot list fields on non-struct type")
        return list(self.fields_.values())

    def field_named(self, name: str) -> Field | None:
        if self.fields_ is None:
            raise DataException("Cannot look up fields on non-struct type")
        return self.fields_.get(name)

    # -- factories ---------------------------------------------------------------------------
    @staticmethod
    def of(type: Type) -> "SchemaBuilder":
        return SchemaBuilder(type)

    @staticmethod
    def int8() -> "SchemaBuilder":
        return SchemaBuilder(Type.INT8)

    @staticmethod
    def int16() -> "SchemaBuilder":
        return SchemaBuilder(Type.INT16)

    @staticmethod
    def int32() -> "SchemaBuilder":
        return SchemaBuilder(Type.INT32)

    @staticmethod
    def int64() -> "SchemaBuilder":
        return SchemaBuilder(Type.INT64)

    @staticmethod
    def float32() -> "SchemaBuilder":
        return SchemaBuilder(Type.FLOAT32)

    @staticmethod
    def float64() -> "SchemaBuilder":
        return SchemaBuilder(Type.FLOAT64)

    @staticmethod
    def boolean() -> "SchemaBuilder":
        return SchemaBuilder(Type.BOOLEAN)

    @staticmethod
    def string() -> "SchemaBuilder":
        return SchemaBuilder(Type.STRING)

    @staticmethod
    def bytes_() -> "SchemaBuilder":
        return SchemaBuilder(Type.BYTES)

    @staticmethod
    def struct() -> "SchemaBuilder":
        return SchemaBuilder(Type.STRUCT)

    @staticmethod
    def array(value_schema: "Schema | SchemaBuilder") -> "SchemaBuilder":
        builder = SchemaBuilder(Type.ARRAY)
        builder.value_schema_ = value_schema.build() if isinstance(value_schema, SchemaBuilder) else value_schema
        return builder

    @staticmethod
    def map(key_schema: "Schema | SchemaBuilder", value_schema: "Schema | SchemaBuilder") -> "SchemaBuilder":
        builder = SchemaBuilder(Type.MAP)
        builder.key_schema_ = key_schema.build() if isinstance(key_schema, SchemaBuilder) else key_schema
        builder.value_schema_ = value_schema.build() if isinstance(value_schema, SchemaBuilder) else value_schema
        return builder

    # -- build -------------------------------------------------------------------------------
    def _peek(self) -> Schema:
        """The schema as built so far, without a default (to validate a default against it)."""
        return Schema(self.type, bool(self.optional_), None, self.name_, self.version_, self.doc_,
                      self.parameters_, list(self.fields_.values()) if self.fields_ is not None else None,
                      self.key_schema_, self.value_schema_)

    def build(self) -> Schema:
        return Schema(self.type, bool(self.optional_), self.default_, self.name_, self.version_, self.doc_,
                      self.parameters_, list(self.fields_.values()) if self.fields_ is not None else None,
                      self.key_schema_, self.value_schema_)

    def schema(self) -> Schema:
        return self.build()


def copy_schema_basics(source: Schema, builder: SchemaBuilder | None = None) -> SchemaBuilder:
    """Kafka's SchemaUtil.copySchemaBasics: name, version, doc and parameters (not optional/default)."""
    target = builder if builder is not None else SchemaBuilder(source.type)
    target.name(source.name)
    target.version(source.version)
    target.doc(source.doc)
    if source.parameters:
        target.parameters(source.parameters)
    return target


class SchemaAndValue(NamedTuple):
    schema: Schema | None
    value: Any


NULL_SCHEMA_AND_VALUE = SchemaAndValue(None, None)


class Struct:
    """A value of a STRUCT schema: ``put`` validates each value against its field's schema."""

    __slots__ = ("schema", "_values")

    def __init__(self, schema: Schema) -> None:
        if schema.type is not Type.STRUCT:
            raise DataException("Not a struct schema: " + repr(schema))
        self.schema = schema
        self._values: list[Any] = [None] * len(schema.fields)

    @classmethod
    def from_checked(cls, schema: Schema, values: list[Any]) -> "Struct":
        """A struct of values already checked against their fields (a converter that type-checked
        each one while reading it), in field order: no second validation per field."""
        struct = cls.__new__(cls)
        struct.schema = schema
        struct._values = values
        return struct

    def _lookup(self, name: str) -> Field:
        field = self.schema.field(name)
        if field is None:
            raise DataException(name + " is not a valid field name")
        return field

    def put(self, field: str | Field, value: Any) -> "Struct":
        f = self._lookup(field) if isinstance(field, str) else field
        validate_value(f.schema, value, f.name)
        self._values[f.index] = value
        return self

    def get(self, field: str | Field) -> Any:
        f = self._lookup(field) if isinstance(field, str) else field
        value = self._values[f.index]
        if value is None and f.schema.default is not None:
            return f.schema.default
        return value

    def get_without_default(self, field: str | Field) -> Any:
        f = self._lookup(field) if isinstance(field, str) else field
        return self._values[f.index]

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __setitem__(self, name: str, value: Any) -> None:
        self.put(name, value)

    def validate(self) -> None:
        """Every field's value (with its default) fits its schema: required fields are set."""
        for f in self.schema.fields:
            validate_value(f.schema, self.get(f), f.name)

    def items(self) -> Iterator[tuple[str, Any]]:
        for f in self.schema.fields:
            yield f.name, self.get(f)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Struct):
            return NotImplemented
        return self.schema == other.schema and _freeze(self._values) == _freeze(other._values)

    def __hash__(self) -> int:
        return hash((self.schema, _freeze(self._values)))

    def __repr__(self) -> str:
        parts = [f"{f.name}={self._values[f.index]}" for f in self.schema.fields
                 if self._values[f.index] is not None]
        return "Struct{" + ",".join(parts) + "}"


# -- logical types ----------------------------------------------------------------------------
_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MS_PER_DAY = 86_400_000


class Decimal:
    """Kafka's Decimal: BYTES holding the unscaled value in big-endian two's complement; ``scale``."""

    LOGICAL_NAME = "org.apache.kafka.connect.data.Decimal"
    SCALE_FIELD = "scale"

    @staticmethod
    def builder(scale: int) -> SchemaBuilder:
        return SchemaBuilder.bytes_().name(Decimal.LOGICAL_NAME).parameter(Decimal.SCALE_FIELD, str(scale)).version(1)

    @staticmethod
    def schema(scale: int) -> Schema:
        return Decimal.builder(scale).build()

    @staticmethod
    def scale(schema: Schema) -> int:
        text = (schema.parameters or {}).get(Decimal.SCALE_FIELD)
        if text is None:
            raise DataException("Invalid Decimal schema: scale parameter not found.")
        try:
            return int(text)
        except ValueError:
            raise DataException(f"Invalid scale parameter found in Decimal schema: {text}") from None

    @staticmethod
    def from_logical(schema: Schema, value: _decimal.Decimal) -> bytes:
        scale = Decimal.scale(schema)
        sign, digits, exponent = value.as_tuple()
        if not isinstance(exponent, int):
            raise DataException(f"Decimal value is not finite: {value}")
        if -exponent != scale:
            raise DataException(
                f"Decimal value has mismatching scale for given Decimal schema. Schema has scale {scale}, "
                f"value has scale {-exponent}.")
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        length = max(1, (unscaled.bit_length() + 8) // 8)
        return unscaled.to_bytes(length, "big", signed=True)

    @staticmethod
    def to_logical(schema: Schema, value: bytes) -> _decimal.Decimal:
        unscaled = int.from_bytes(bytes(value), "big", signed=True)
        return _decimal.Decimal(unscaled).scaleb(-Decimal.scale(schema))


class Date:
    """Kafka's Date: INT32 days since the Unix epoch (as a datetime.date)."""

    LOGICAL_NAME = "org.apache.kafka.connect.data.Date"
    SCHEMA: Schema

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int32().name(Date.LOGICAL_NAME).version(1)

    @staticmethod
    def from_logical(schema: Schema, value: _dt.date) -> int:
        if isinstance(value, _dt.datetime):
            utc = _as_utc(value)
            if utc.time() != _dt.time(0):
                raise DataException("Kafka Connect Date type should not have any time fields set to non-zero values.")
            value = utc.date()
        return (value - _EPOCH_DATE).days

    @staticmethod
    def to_logical(schema: Schema, value: int) -> _dt.date:
        return _EPOCH_DATE + _dt.timedelta(days=int(value))


class Time:
    """Kafka's Time: INT32 milliseconds since midnight (as a datetime.time)."""

    LOGICAL_NAME = "org.apache.kafka.connect.data.Time"
    SCHEMA: Schema

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int32().name(Time.LOGICAL_NAME).version(1)

    @staticmethod
    def from_logical(schema: Schema, value: _dt.time) -> int:
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000

    @staticmethod
    def to_logical(schema: Schema, value: int) -> _dt.time:
        ms = int(value)
        if ms < 0 or ms >= _MS_PER_DAY:
            raise DataException("Kafka Connect Time type should not have any date fields set to non-zero values.")
        seconds, millis = divmod(ms, 1000)
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        return _dt.time(hour, minute, second, millis * 1000)


class Timestamp:
    """Kafka's Timestamp: INT64 milliseconds since the Unix epoch (as a UTC datetime)."""

    LOGICAL_NAME = "org.apache.kafka.connect.data.Timestamp"
    SCHEMA: Schema

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int64().name(Timestamp.LOGICAL_NAME).version(1)

    @staticmethod
    def from_logical(schema: Schema, value: _dt.datetime) -> int:
        delta = _as_utc(value) - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000

    @staticmethod
    def to_logical(schema: Schema, value: int) -> _dt.datetime:
        return _EPOCH + _dt.timedelta(milliseconds=int(value))


def _as_utc(value: _dt.datetime) -> _dt.datetime:
    return value.replace(tzinfo=_dt.timezone.utc) if value.tzinfo is None else value.astimezone(_dt.timezone.utc)


Date.SCHEMA = Date.builder().build()
Time.SCHEMA = Time.builder().build()
Timestamp.SCHEMA = Timestamp.builder().build()

LOGICAL_NAMES = (Decimal.LOGICAL_NAME, Date.LOGICAL_NAME, Time.LOGICAL_NAME, Timestamp.LOGICAL_NAME)
_LOGICAL_CLASSES: dict[str, type] = {Decimal.LOGICAL_NAME: _decimal.Decimal, Date.LOGICAL_NAME: _dt.date,
                                     Time.LOGICAL_NAME: _dt.time, Timestamp.LOGICAL_NAME: _dt.datetime}


# -- validation -------------------------------------------------------------------------------
def _type_name(value: Any) -> str:
    return type(value).__name__


_PLAIN_CLASSES: dict[Type, tuple[type, ...]] = {
    Type.BOOLEAN: (bool,), Type.STRING: (str,), Type.BYTES: (bytes, bytearray, memoryview),
    Type.ARRAY: (list, tuple), Type.MAP: (dict,),
}


def schema_type_of(value: Any) -> Type | None:
    """The schema type of a schemaless value, as Kafka's ``ConnectSchema.schemaType(Class)`` finds
    it from the value's class (a Python int is Java's Long, a float a Double); None for a class
    with no schema type of its own, which includes the logical types' values (Decimal, dates and
    times: BigDecimal and java.util.Date are not in Kafka's table). The JSON converter and Cast
    each turn None into their own error."""
    for python_type, schema_type in _SCHEMALESS_TYPES:
        if isinstance(value, python_type):
            return schema_type
    return None


#: bool before int (a bool is an int in Python, a Boolean in Java)
_SCHEMALESS_TYPES: tuple[tuple[type | tuple[type, ...], Type], ...] = (
    (bool, Type.BOOLEAN), (int, Type.INT64), (float, Type.FLOAT64), (str, Type.STRING),
    ((bytes, bytearray, memoryview), Type.BYTES), ((list, tuple), Type.ARRAY), (dict, Type.MAP),
    (Struct, Type.STRUCT),
)


def _matches(schema: Schema, value: Any) -> bool:
    """Whether ``value``'s Python type is one the schema accepts (ConnectSchema.expectedClassesFor)."""
    name = schema.name
    if name is not None and name in _LOGICAL_CLASSES:
        return isinstance(value, _LOGICAL_CLASSES[name])
    t = schema.type
    plain = _PLAIN_CLASSES.get(t)
    if plain is not None:
        return isinstance(value, plain)
    bounds = _INT_RANGES.get(t)
    if bounds is not None:
        return isinstance(value, int) and not isinstance(value, bool) and bounds[0] <= value <= bounds[1]
    if t is Type.FLOAT32 or t is Type.FLOAT64:
        return isinstance(value, (float, int)) and not isinstance(value, bool)
    return isinstance(value, Struct)


def validate_value(schema: Schema | None, value: Any, field_name: str | None = None) -> None:
    """Raise DataException unless ``value`` fits ``schema`` (Kafka's ConnectSchema.validateValue)."""
    where = f' for field: "{field_name}"' if field_name is not None else ""
    if schema is None:
        if value is not None:
            raise DataException(f"Invalid value: a value of type {_type_name(value)} without a schema{where}")
        return
    if value is None:
        if not schema.optional:
            if field_name is not None:
                raise DataException(
                    f'Invalid value: null used for required field: "{field_name}", schema type: {schema.type}')
            raise DataException(f"Invalid value: null used for required field, schema type: {schema.type}")
        return
    if not _matches(schema, value):
        raise DataException(
            f"Invalid Java object for schema with type {schema.type}: {_type_name(value)} ({value!r}){where}")
    if schema.type is Type.STRUCT:
        if value.schema != schema:
            raise DataException("Struct schemas do not match.")
        value.validate()
    elif schema.type is Type.ARRAY:
        for entry in value:
            validate_value(schema.value_schema, entry, field_name)
    elif schema.type is Type.MAP:
        for key, entry in value.items():
            validate_value(schema.key_schema, key, field_name)
            validate_value(schema.value_schema, entry, field_name)


def validate(schema: Schema | None, value: Any) -> None:
    """``validate_value`` without a field name: the module's short entry point."""
    validate_value(schema, value)
