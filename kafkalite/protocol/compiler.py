"""Compile a (message, version) spec into specialised Python decode/encode functions.

Why generated code: the broker decodes every Produce request and encodes every Fetch
response, and an interpretive walk (look up each field's type, version range, nullability
per call) costs several times more than straight-line code. For each struct and version this
module emits Python source in which the version decisions are already made: consecutive
fixed-width fields become one ``struct.Struct`` call, compact/classic lengths and null checks
are inlined, and each nested struct is its own function. The source is ``exec``-ed once and
cached; it is registered with ``linecache`` so tracebacks show it.

Generated decoders have the signature ``f(buf: memoryview, pos) -> (dict, pos)``; encoders
``f(d: dict, out: bytearray, parts: list) -> bytearray`` (``out`` is the buffer being
filled; big bytes chunks are flushed to ``parts`` by reference, see
:func:`.primitives.put_bytes`).

Each (message, version) has two encoders: the fast one (a missing key takes its default,
unknown keys are ignored) and a strict one (:func:`strict_encoder`), whose struct functions
first compare the dict's keys with the struct's fields and raise :class:`EncodeError` naming
the message, version and key. The check is compiled into the strict variant only, so the
fast encoders carry no per-field or per-struct cost for it; the codec picks the variant once
(``codec.set_strict``).
"""
from __future__ import annotations

import itertools
import linecache
import logging
import struct
import uuid
from typing import Any, Callable

from . import primitives
from .errors import EncodeError, InvalidFrameError, TruncatedError
from .schema import FIXED_CODES, FIXED_SIZES, FieldSpec, MessageSpec, StructSpec

log = logging.getLogger(__name__)

_unit_ids = itertools.count()


def _trunc(what: str) -> TruncatedError:
    return TruncatedError(f"{what}: length points past the end of the data")


def _bad_len(what: str, n: int) -> InvalidFrameError:
    return InvalidFrameError(f"{what}: invalid length {n}")


def _null(what: str) -> EncodeError:
    return EncodeError(f"{what}: null is not allowed in this version")


def _long_str(what: str, n: int) -> EncodeError:
    return EncodeError(f"{what}: string of {n} bytes is longer than 32767")


def _pack_array(code: str, values: Any) -> bytes:
    return struct.pack(">%d%s" % (len(values), code), *values)


def _strict_keys(d: Any, known: frozenset, required: frozenset, message: str, where: str) -> EncodeError:
    """The error for a dict that a strict encoder refuses (called only once the check failed).

    ``message`` is "<Message> v<version>", ``where`` " in <Struct>" for nested structs or "".
    """
    unknown = sorted(str(k) for k in d if k not in known)
    if unknown:
        more = f"; also {', '.join(map(repr, unknown[1:]))}" if unknown[1:] else ""
        return EncodeError(f"{message}: unknown field {unknown[0]!r}{where} (no field of that name "
                           f"in any version{more})")
    missing = sorted(required - d.keys())
    more = f"; also {', '.join(map(repr, missing[1:]))}" if missing[1:] else ""
    return EncodeError(f"{message}: missing field {missing[0]!r}{where} (on the wire in this "
                       f"version{more})")


def _tag_bytes(fn: Callable, value: Any) -> bytes:
    parts: list = []
    out = fn(value, bytearray(), parts)
    parts.append(out)
    return b"".join(parts)


_BASE_NS: dict[str, Any] = {
    "_uv_rest": primitives.uvarint_rest,
    "_read_uv": primitives.read_uvarint,
    "_put_uv": primitives.put_uvarint,
    "_skip_tags": primitives.skip_tags,
    "_put_bytes": primitives.put_bytes,
    "_uuid_b": primitives.uuid_bytes,
    "_is_def": primitives.is_default,
    "_UUID": uuid.UUID,
    "_trunc": _trunc,
    "_bad_len": _bad_len,
    "_null": _null,
    "_long_str": _long_str,
    "_pack_array": _pack_array,
    "_tag_bytes": _tag_bytes,
    "_strict_keys": _strict_keys,
    "_H16": struct.Struct(">h").unpack_from,
    "_I32": struct.Struct(">i").unpack_from,
    "_P16": struct.Struct(">h").pack,
    "_P32": struct.Struct(">i").pack,
    "_str": str,
    "_bytes": bytes,
}


def _min_size(spec: StructSpec, version: int, flexible: bool) -> int:
    """Fewest bytes one element of ``spec`` can take on the wire (for count sanity checks)."""
    total = 1 if flexible else 0
    for f in spec.fields:
        if not f.present(version) or (flexible and f.tagged_in(version)):
            continue
        compact = f.compact_in(version, flexible)
        if f.is_array:
            total += 1 if compact else 4
        elif f.elem == "struct":
            total += _min_size(f.struct_spec, version, flexible)
        elif f.elem in FIXED_SIZES:
            total += FIXED_SIZES[f.elem]
        elif f.elem == "string":
            total += 1 if compact else 2
        else:
            total += 1 if compact else 4
    return total


class _Unit:
    """One compilation: collects functions and constants, then execs them together."""

    def __init__(self, label: str, version: int, flexible: bool) -> None:
        self.label = label
        self.version = version
        self.flexible = flexible
        self.ns: dict[str, Any] = dict(_BASE_NS)
        self.funcs: list[list[str]] = []
        self._n = itertools.count()
        self._consts: dict[tuple, str] = {}

    def name(self, hint: str) -> str:
        return f"_{hint}_{next(self._n)}"

    def const(self, value: Any) -> str:
        key = (type(value).__name__, repr(value))
        if key not in self._consts:
            nm = self.name("c")
            self.ns[nm] = value
            self._consts[key] = nm
        return self._consts[key]

    def struct_fn(self, fmt: str, method: str) -> str:
        return self.const(getattr(struct.Struct(fmt), method))

    def build(self, entry: str) -> tuple[Callable, str]:
        source = "\n".join(line for fn in self.funcs for line in fn) + "\n"
        filename = f"<kafkalite.protocol {self.label} #{next(_unit_ids)}>"
        code = compile(source, filename, "exec")
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(code, self.ns)  # noqa: S102 - source generated from our own tables only
        return self.ns[entry], source

    # ---- helpers shared by decoders and encoders ------------------------------------

    def fields_split(self, spec: StructSpec) -> tuple[list[FieldSpec], list[FieldSpec]]:
        """(regular fields, tagged fields sorted by tag) on the wire in this version."""
        regular, tagged = [], []
        for f in spec.fields:
            if not f.present(self.version):
                continue
            if f.tagged_in(self.version):
                if not self.flexible:
                    raise ValueError(f"{spec.name}.{f.name}: tagged in a non-flexible version")
                if f.tag is None:
                    raise ValueError(f"{spec.name}.{f.name}: tagged without a tag number")
                tagged.append(f)
            else:
                regular.append(f)
        tagged.sort(key=lambda f: f.tag or 0)   # every tagged field has its tag (checked above)
        return regular, tagged

    def default_expr(self, f: FieldSpec) -> str:
        """Expression producing a fresh default value for ``f`` (decode side)."""
        if f.is_array:
            return "None" if (f.has_default and f.default is None) else "[]"
        if f.elem == "struct":
            spec = f.struct_spec
            if all(not g.is_array and g.elem != "struct" for g in spec.fields):
                # only immutable values: a copy of one prebuilt dict, not a comprehension per
                # decode (an absent tagged struct is built for every partition of a FetchResponse)
                return self.const(spec.default_dict()) + ".copy()"
            return self.const(spec.default_dict) + "()"
        return self.const(f.default_value())

    def encode_default(self, f: FieldSpec) -> str:
        """Constant used when an encoder's input dict lacks ``f``."""
        if f.is_array:
            return "None" if (f.has_default and f.default is None) else "()"
        if f.elem == "struct":
            return self.const({})
        return self.const(f.default_value())


# ---------------------------------------------------------------------------- decoding


class _Decoder(_Unit):
    def struct(self, spec: StructSpec) -> str:
        fname = self.name("d_" + spec.name)
        regular, tagged = self.fields_split(spec)
        body: list[str] = ["    blen = len(buf)"]
        var: dict[str, str] = {}
        i = 0
        while i < len(regular):
            f = regular[i]
            if not f.is_array and f.elem in FIXED_CODES:
                group = []
                while i < len(regular) and not regular[i].is_array and regular[i].elem in FIXED_CODES:
                    group.append(regular[i])
                    i += 1
                fmt = ">" + "".join(FIXED_CODES[g.elem] for g in group)
                names = [f"v{len(var) + k}" for k in range(len(group))]
                for g, nm in zip(group, names):
                    var[g.key] = nm
                unpack = self.struct_fn(fmt, "unpack_from")
                body.append(f"    ({', '.join(names)},) = {unpack}(buf, pos)")
                body.append(f"    pos += {struct.calcsize(fmt)}")
                for g, nm in zip(group, names):
                    if g.elem == "uuid":
                        body.append(f"    {nm} = _UUID(bytes={nm})")
                continue
            nm = f"v{len(var)}"
            var[f.key] = nm
            self.read_value(body, "    ", nm, f, f"{spec.name}.{f.name}", 0)
            i += 1
        if self.flexible:
            if tagged:
                for f in tagged:
                    nm = f"v{len(var)}"
                    var[f.key] = nm
                    body.append(f"    {nm} = {self.default_expr(f)}")
                body += [
                    "    nt, pos = _read_uv(buf, pos)",
                    "    if nt > blen - pos:",
                    f"        raise _trunc({spec.name + ' tags'!r})",
                    "    for _ in range(nt):",
                    "        tag, pos = _read_uv(buf, pos)",
                    "        size, pos = _read_uv(buf, pos)",
                    "        if size > blen - pos:",
                    f"            raise _trunc({spec.name + ' tagged field'!r})",
                ]
                kw = "if"
                for f in tagged:
                    tfn = self.tagged_reader(f, spec.name)
                    body.append(f"        {kw} tag == {f.tag}:")
                    body.append(f"            {var[f.key]} = {tfn}(buf[pos:pos + size])")
                    kw = "elif"
                body.append("        pos += size")
            else:
                body.append("    pos = _skip_tags(buf, pos)")
        items = []
        for f in spec.fields:
            items.append(f"{f.key!r}: {var.get(f.key) or self.default_expr(f)}")
        body.append("    return {" + ", ".join(items) + "}, pos")
        self.funcs.append([f"def {fname}(buf, pos):"] + body)
        return fname

    def tagged_reader(self, f: FieldSpec, owner: str) -> str:
        """A function decoding one tagged value from its own sub-view (bounded by its size)."""
        fname = self.name("t_" + f.name)
        body = ["    pos = 0", "    blen = len(buf)"]
        self.read_value(body, "    ", "v", f, f"{owner}.{f.name}", 0)
        body.append("    return v")
        self.funcs.append([f"def {fname}(buf):"] + body)
        return fname

    def read_len(self, out: list[str], ind: str, n: str, compact: bool, width: int) -> None:
        if compact:
            out += [f"{ind}{n} = buf[pos]", f"{ind}pos += 1",
                    f"{ind}if {n} > 127:", f"{ind}    {n}, pos = _uv_rest(buf, pos, {n})",
                    f"{ind}{n} -= 1"]
        else:
            out += [f"{ind}({n},) = {'_H16' if width == 2 else '_I32'}(buf, pos)",
                    f"{ind}pos += {width}"]

    def read_value(self, out: list[str], ind: str, target: str, f: FieldSpec, what: str,
                   depth: int) -> None:
        """Emit code reading field ``f`` (array or single value) into ``target``."""
        compact = f.compact_in(self.version, self.flexible)
        nullable = f.nullable_in(self.version)
        if f.is_array:
            self.read_array(out, ind, target, f, compact, nullable, what, depth)
        else:
            self.read_single(out, ind, target, f.elem, f.struct, compact, nullable, what, depth)

    def read_single(self, out: list[str], ind: str, target: str, elem: str,
                    sub: StructSpec | None, compact: bool, nullable: bool, what: str,
                    depth: int) -> None:
        if elem == "struct":
            assert sub is not None   # a struct field carries its StructSpec
            fn = self.struct(sub)
            out.append(f"{ind}{target}, pos = {fn}(buf, pos)")
            return
        if elem in FIXED_CODES:
            unpack = self.struct_fn(">" + FIXED_CODES[elem], "unpack_from")
            out.append(f"{ind}({target},) = {unpack}(buf, pos)")
            out.append(f"{ind}pos += {FIXED_SIZES[elem]}")
            if elem == "uuid":
                out.append(f"{ind}{target} = _UUID(bytes={target})")
            return
        n = f"n{depth}"
        self.read_len(out, ind, n, compact, 2 if elem == "string" else 4)
        out.append(f"{ind}if {n} < 0:")
        if nullable:
            out.append(f"{ind}    if {n} != -1:")
            out.append(f"{ind}        raise _bad_len({what!r}, {n})")
            out.append(f"{ind}    {target} = None")
        else:
            out.append(f"{ind}    raise _bad_len({what!r}, {n})")
        out.append(f"{ind}elif {n} > blen - pos:")
        out.append(f"{ind}    raise _trunc({what!r})")
        out.append(f"{ind}else:")
        if elem == "string":
            out.append(f"{ind}    {target} = _str(buf[pos:pos + {n}], 'utf-8')")
        elif elem == "bytes":
            out.append(f"{ind}    {target} = _bytes(buf[pos:pos + {n}])")
        else:  # records: zero-copy view into the frame
            out.append(f"{ind}    {target} = buf[pos:pos + {n}]")
        out.append(f"{ind}    pos += {n}")

    def read_array(self, out: list[str], ind: str, target: str, f: FieldSpec, compact: bool,
                   nullable: bool, what: str, depth: int) -> None:
        n = f"n{depth}"
        self.read_len(out, ind, n, compact, 4)
        if f.elem == "struct":
            min_size = max(1, _min_size(f.struct_spec, self.version, self.flexible))
        elif f.elem in FIXED_SIZES:
            min_size = FIXED_SIZES[f.elem]
        else:
            min_size = 1 if compact else (2 if f.elem == "string" else 4)
        out.append(f"{ind}if {n} < 0:")
        if nullable:
            out.append(f"{ind}    if {n} != -1:")
            out.append(f"{ind}        raise _bad_len({what!r}, {n})")
            out.append(f"{ind}    {target} = None")
        else:
            out.append(f"{ind}    raise _bad_len({what!r}, {n})")
        check = n if min_size == 1 else f"{n} * {min_size}"
        out.append(f"{ind}elif {check} > blen - pos:")
        out.append(f"{ind}    raise _trunc({what!r})")
        out.append(f"{ind}else:")
        inner = ind + "    "
        if f.elem in FIXED_CODES:
            it = self.struct_fn(">" + FIXED_CODES[f.elem], "iter_unpack")
            out.append(f"{inner}end = pos + {n} * {min_size}")
            if f.elem == "uuid":
                out.append(f"{inner}{target} = [_UUID(bytes=x) for (x,) in {it}(buf[pos:end])]")
            else:
                out.append(f"{inner}{target} = [x for (x,) in {it}(buf[pos:end])]")
            out.append(f"{inner}pos = end")
            return
        out.append(f"{inner}{target} = []")
        out.append(f"{inner}for _ in range({n}):")
        elem_var = f"e{depth}"
        self.read_single(out, inner + "    ", elem_var, f.elem, f.struct, compact, False,
                         what + "[]", depth + 1)
        out.append(f"{inner}    {target}.append({elem_var})")


# ---------------------------------------------------------------------------- encoding


class _Encoder(_Unit):
    def __init__(self, label: str, version: int, flexible: bool, strict: bool = False,
                 message: str = "") -> None:
        super().__init__(label, version, flexible)
        self.strict = strict
        self.message_name = message
        self.message = f"{message} v{version}"

    def struct(self, spec: StructSpec) -> str:
        fname = self.name("e_" + spec.name)
        regular, tagged = self.fields_split(spec)
        body: list[str] = []
        if self.strict:
            # every key a field of the struct in some version; every non-tagged field of this
            # version present (tagged ones may be absent: absent means "default, not sent")
            known = self.const(frozenset(f.key for f in spec.fields))
            required = self.const(frozenset(f.key for f in regular))
            where = "" if spec.name == self.message_name else f" in {spec.name}"
            body += [
                f"    if not (d.keys() <= {known} and d.keys() >= {required}):",
                f"        raise _strict_keys(d, {known}, {required}, {self.message!r}, {where!r})",
            ]
        body.append("    get = d.get")
        i = 0
        while i < len(regular):
            f = regular[i]
            if not f.is_array and f.elem in FIXED_CODES:
                group = []
                while i < len(regular) and not regular[i].is_array and regular[i].elem in FIXED_CODES:
                    group.append(regular[i])
                    i += 1
                fmt = ">" + "".join(FIXED_CODES[g.elem] for g in group)
                args = []
                for g in group:
                    expr = f"get({g.key!r}, {self.encode_default(g)})"
                    args.append(f"_uuid_b({expr})" if g.elem == "uuid" else expr)
                pack = self.struct_fn(fmt, "pack")
                body.append(f"    out += {pack}({', '.join(args)})")
                continue
            body.append(f"    v = get({f.key!r}, {self.encode_default(f)})")
            self.write_value(body, "    ", "v", f, f"{spec.name}.{f.name}", 0)
            i += 1
        if self.flexible:
            if not tagged:
                body.append("    out.append(0)")
            else:
                body.append("    tags = []")
                for f in tagged:
                    tfn = self.tagged_writer(f, spec.name)
                    # absent = the default itself, so an absent tagged struct stays off the wire
                    # (an empty dict would differ from the struct's default dict)
                    default = self.const(f.default_value())
                    body.append(f"    v = get({f.key!r}, {default})")
                    body.append(f"    if not _is_def(v, {default}):")
                    body.append(f"        tags.append(({f.tag}, _tag_bytes({tfn}, v)))")
                body += [
                    "    _put_uv(out, len(tags))",
                    "    for tag, tb in tags:",
                    "        _put_uv(out, tag)",
                    "        _put_uv(out, len(tb))",
                    "        out += tb",
                ]
        body.append("    return out")
        self.funcs.append([f"def {fname}(d, out, parts):"] + body)
        return fname

    def tagged_writer(self, f: FieldSpec, owner: str) -> str:
        fname = self.name("te_" + f.name)
        body: list[str] = []
        self.write_value(body, "    ", "v", f, f"{owner}.{f.name}", 0)
        body.append("    return out")
        self.funcs.append([f"def {fname}(v, out, parts):"] + body)
        return fname

    def write_len(self, out: list[str], ind: str, n: str, compact: bool, width: int) -> None:
        if compact:
            out += [f"{ind}if {n} < 127:", f"{ind}    out.append({n} + 1)",
                    f"{ind}else:", f"{ind}    _put_uv(out, {n} + 1)"]
        else:
            out.append(f"{ind}out += {'_P16' if width == 2 else '_P32'}({n})")

    def write_null(self, out: list[str], ind: str, compact: bool, width: int, nullable: bool,
                   what: str) -> None:
        if not nullable:
            out.append(f"{ind}raise _null({what!r})")
        elif compact:
            out.append(f"{ind}out.append(0)")
        else:
            null_len = self.const(b"\xff" * width)
            out.append(f"{ind}out += {null_len}")

    def write_value(self, out: list[str], ind: str, src: str, f: FieldSpec, what: str,
                    depth: int) -> None:
        compact = f.compact_in(self.version, self.flexible)
        nullable = f.nullable_in(self.version)
        if f.is_array:
            n = f"n{depth}"
            out.append(f"{ind}if {src} is None:")
            self.write_null(out, ind + "    ", compact, 4, nullable, what)
            out.append(f"{ind}else:")
            inner = ind + "    "
            out.append(f"{inner}{n} = len({src})")
            self.write_len(out, inner, n, compact, 4)
            if f.elem in FIXED_CODES and f.elem != "uuid":
                out.append(f"{inner}out += _pack_array({FIXED_CODES[f.elem]!r}, {src})")
                return
            elem_var = f"e{depth}"
            out.append(f"{inner}for {elem_var} in {src}:")
            self.write_single(out, inner + "    ", elem_var, f.elem, f.struct, compact, False,
                              what + "[]", depth + 1)
        else:
            self.write_single(out, ind, src, f.elem, f.struct, compact, nullable, what, depth)

    def write_single(self, out: list[str], ind: str, src: str, elem: str,
                     sub: StructSpec | None, compact: bool, nullable: bool, what: str,
                     depth: int) -> None:
        if elem == "struct":
            assert sub is not None   # a struct field carries its StructSpec
            fn = self.struct(sub)
            out.append(f"{ind}out = {fn}({src}, out, parts)")
        elif elem in FIXED_CODES:
            pack = self.struct_fn(">" + FIXED_CODES[elem], "pack")
            arg = f"_uuid_b({src})" if elem == "uuid" else src
            out.append(f"{ind}out += {pack}({arg})")
        elif elem == "string":
            b, n = f"b{depth}", f"m{depth}"
            out.append(f"{ind}if {src} is None:")
            self.write_null(out, ind + "    ", compact, 2, nullable, what)
            out.append(f"{ind}else:")
            out.append(f"{ind}    {b} = {src}.encode('utf-8')")
            out.append(f"{ind}    {n} = len({b})")
            if not compact:
                out.append(f"{ind}    if {n} > 32767:")
                out.append(f"{ind}        raise _long_str({what!r}, {n})")
            self.write_len(out, ind + "    ", n, compact, 2)
            out.append(f"{ind}    out += {b}")
        else:  # bytes / records
            out.append(f"{ind}out = _put_bytes(out, parts, {src}, {compact}, {nullable}, {what!r})")


# ---------------------------------------------------------------------------- cache

_cache: dict[tuple[str, int, str], tuple[Callable, str]] = {}
DIRECTIONS = ("decode", "encode", "encode-strict")


def _compile(spec: MessageSpec, version: int, direction: str) -> tuple[Callable, str]:
    key = (spec.name, version, direction)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    flexible = spec.is_flexible(version)
    label = f"{spec.name} v{version} {direction}"
    unit: _Decoder | _Encoder
    if direction == "decode":
        unit = _Decoder(label, version, flexible)
    elif direction in ("encode", "encode-strict"):
        unit = _Encoder(label, version, flexible, strict=direction == "encode-strict",
                        message=spec.name)
    else:
        raise ValueError(f"unknown direction {direction!r}; expected one of {DIRECTIONS}")
    entry = unit.struct(spec.body)
    result = unit.build(entry)
    _cache[key] = result
    log.debug("compiled %s v%d %s (%d source lines)", spec.name, version, direction,
              result[1].count("\n"))
    return result


def decoder(spec: MessageSpec, version: int) -> Callable[[memoryview, int], tuple[dict, int]]:
    """The cached decoder of ``spec`` at ``version`` (caller checks the version is valid)."""
    return _compile(spec, version, "decode")[0]


def encoder(spec: MessageSpec, version: int) -> Callable[[dict, bytearray, list], bytearray]:
    """The cached fast encoder of ``spec`` at ``version`` (defaults for missing keys)."""
    return _compile(spec, version, "encode")[0]


def strict_encoder(spec: MessageSpec, version: int) -> Callable[[dict, bytearray, list], bytearray]:
    """The cached strict encoder: the same bytes as :func:`encoder` for a complete dict, and an
    :class:`EncodeError` for a key that is no field of its struct in any version, or a
    non-tagged field of ``version`` missing from the dict."""
    return _compile(spec, version, "encode-strict")[0]


def generated_source(spec: MessageSpec, version: int, direction: str) -> str:
    """The Python source generated for one (message, version, direction in DIRECTIONS)."""
    return _compile(spec, version, direction)[1]
