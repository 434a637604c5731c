"""Type descriptions for CDR payloads, and a small IDL subset that produces them.

A topic's type is a :class:`StructType` whose members are primitives, strings, fixed arrays,
sequences or nested structs. Types come from the mapping config (inline tables whose member types
are written as IDL type expressions, e.g. ``"sequence<float, 8>"`` or ``"double[3]"``) or from an
IDL file. The IDL subset: ``module``, ``struct`` (with ``@final``/``@appendable``/``@mutable``),
``typedef``, integer ``const``; members with ``@key``/``@id(N)``; comments and preprocessor lines
are skipped. Unions, enums, maps and optionals are not part of the subset and are reported as
unsupported with the line number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from wrtfd.errors import ConfigError

__all__ = [
    "PRIMITIVES",
    "ArrayType",
    "Member",
    "Primitive",
    "SequenceType",
    "StringType",
    "StructType",
    "TypeDesc",
    "parse_idl",
    "parse_type_expr",
    "struct_from_config",
]


@dataclass(frozen=True, slots=True)
class Primitive:
    """A fixed-size scalar. ``code`` is its struct format letter; ``wrtf`` the WRTF base type."""

    name: str
    code: str
    size: int
    wrtf: str


@dataclass(frozen=True, slots=True)
class StringType:
    bound: int | None = None  # max characters, None = unbounded


@dataclass(frozen=True, slots=True)
class ArrayType:
    """A fixed array; multi-dimensional arrays are flattened (``dims`` kept for docs)."""

    element: TypeDesc
    dims: tuple[int, ...]

    @property
    def length(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n


@dataclass(frozen=True, slots=True)
class SequenceType:
    element: TypeDesc
    bound: int | None = None


@dataclass(frozen=True, slots=True)
class Member:
    name: str
    type: TypeDesc
    member_id: int
    key: bool = False


@dataclass(frozen=True, slots=True)
class StructType:
    name: str
    members: tuple[Member, ...]
    extensibility: str = "final"  # final | appendable | mutable

    def member(self, name: str) -> Member | None:
        for m in self.members:
            if m.name == name:
                return m
        return None


TypeDesc = Primitive | StringType | ArrayType | SequenceType | StructType

_P = Primitive
#: IDL and WRTF spellings of the primitives. ``char`` decodes to its code (an int).
PRIMITIVES: dict[str, Primitive] = {
    "boolean": _P("bool", "?", 1, "bool"),
    "bool": _P("bool", "?", 1, "bool"),
    "octet": _P("uint8", "B", 1, "uint8"),
    "char": _P("char", "B", 1, "uint8"),
    "int8": _P("int8", "b", 1, "int8"),
    "uint8": _P("uint8", "B", 1, "uint8"),
    "short": _P("int16", "h", 2, "int16"),
    "int16": _P("int16", "h", 2, "int16"),
    "unsigned short": _P("uint16", "H", 2, "uint16"),
    "uint16": _P("uint16", "H", 2, "uint16"),
    "long": _P("int32", "i", 4, "int32"),
    "int32": _P("int32", "i", 4, "int32"),
    "unsigned long": _P("uint32", "I", 4, "uint32"),
    "uint32": _P("uint32", "I", 4, "uint32"),
    "long long": _P("int64", "q", 8, "int64"),
    "int64": _P("int64", "q", 8, "int64"),
    "unsigned long long": _P("uint64", "Q", 8, "uint64"),
    "uint64": _P("uint64", "Q", 8, "uint64"),
    "float": _P("float32", "f", 4, "float32"),
    "float32": _P("float32", "f", 4, "float32"),
    "double": _P("float64", "d", 8, "float64"),
    "float64": _P("float64", "d", 8, "float64"),
}

_UNSUPPORTED = {
    "union",
    "enum",
    "bitmask",
    "bitset",
    "map",
    "wstring",
    "wchar",
    "any",
    "fixed",
    "long double",
    "interface",
}
_EXTENSIBILITY = {"final", "appendable", "mutable"}
_MAX_DIM = 1 << 20

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<pre>\#[^\n]*)
  | (?P<name>(?:::)?[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<number>0[xX][0-9A-Fa-f]+|\d+)
  | (?P<string>"[^"\n]*")
  | (?P<punct>[{}<>\[\](),;=@:])
    """,
    re.VERBOSE | re.DOTALL | re.MULTILINE,
)


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str
    text: str
    line: int


def _tokenize(text: str, where: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    line = 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ConfigError(f"{where}:{line}: unexpected character {text[pos]!r}")
        kind = m.lastgroup or ""
        chunk = m.group()
        if kind not in ("ws", "comment", "pre"):
            toks.append(_Tok(kind, chunk, line))
        line += chunk.count("\n")
        pos = m.end()
    return toks


class _Parser:
    """Recursive-descent parser over tokens; ``types`` maps scoped names to resolved types."""

    def __init__(
        self, toks: list[_Tok], where: str, types: dict[str, TypeDesc], consts: dict[str, int]
    ) -> None:
        self.toks = toks
        self.i = 0
        self.where = where
        self.types = types
        self.consts = consts
        self.scope: list[str] = []
        self.show_line = True

    # -- token helpers
    def error(self, msg: str) -> ConfigError:
        if not self.show_line:
            return ConfigError(f"{self.where}: {msg}")
        line = self.toks[self.i].line if self.i < len(self.toks) else (self.toks[-1].line if self.toks else 1)
        return ConfigError(f"{self.where}:{line}: {msg}")

    def peek(self, k: int = 0) -> _Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of input")
        self.i += 1
        return tok

    def expect(self, text: str) -> None:
        tok = self.next()
        if tok.text != text:
            self.i -= 1
            raise self.error(f"expected {text!r}, found {tok.text!r}")

    def accept(self, text: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.text == text:
            self.i += 1
            return True
        return False

    def ident(self, what: str) -> str:
        tok = self.next()
        if tok.kind != "name" or "::" in tok.text:
            self.i -= 1
            raise self.error(f"expected {what}, found {tok.text!r}")
        return tok.text

    def positive_int(self, what: str) -> int:
        tok = self.next()
        if tok.kind == "number":
            value = int(tok.text, 0)
        elif tok.kind == "name" and self._lookup_const(tok.text) is not None:
            value = self._lookup_const(tok.text) or 0
        else:
            self.i -= 1
            raise self.error(f"expected {what} (a positive integer), found {tok.text!r}")
        if not 0 < value <= _MAX_DIM:
            raise self.error(f"{what} must be in 1..{_MAX_DIM}, got {value}")
        return value

    def _scoped(self, name: str) -> str:
        return "::".join([*self.scope, name])

    def _candidates(self, name: str) -> list[str]:
        if name.startswith("::"):
            return [name[2:]]
        return ["::".join([*self.scope[:k], name]) for k in range(len(self.scope), -1, -1)]

    def _lookup_const(self, name: str) -> int | None:
        for c in self._candidates(name):
            if c in self.consts:
                return self.consts[c]
        return None

    def lookup_type(self, name: str) -> TypeDesc:
        for c in self._candidates(name):
            if c in self.types:
                return self.types[c]
        raise self.error(f"unknown type {name!r}")

    # -- grammar
    def annotations(self) -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = []
        while self.accept("@"):
            name = self.next().text
            arg: str | None = None
            if self.accept("("):
                parts: list[str] = []
                while not self.accept(")"):
                    parts.append(self.next().text)
                arg = "".join(parts)
            out.append((name, arg))
        return out

    def type_spec(self) -> TypeDesc:
        tok = self.next()
        word = tok.text
        if word in ("unsigned",):
            second = self.next().text
            if second == "long" and self.peek() is not None and self.peek().text == "long":  # type: ignore[union-attr]
                self.i += 1
                second = "long long"
            word = f"unsigned {second}"
        elif word == "long" and self.peek() is not None and self.peek().text in ("long", "double"):  # type: ignore[union-attr]
            word = f"long {self.next().text}"
        if word in PRIMITIVES:
            return PRIMITIVES[word]
        if word in _UNSUPPORTED:
            raise self.error(
                f"{word!r} is not supported by the IDL subset (primitives, string, sequence, arrays, struct)"
            )
        if word == "string":
            bound = self.positive_int("string bound") if self.accept("<") else None
            if bound is not None:
                self.expect(">")
            return StringType(bound)
        if word == "sequence":
            self.expect("<")
            element = self.type_spec()
            bound = self.positive_int("sequence bound") if self.accept(",") else None
            self.expect(">")
            return SequenceType(element, bound)
        if tok.kind != "name":
            self.i -= 1
            raise self.error(f"expected a type, found {word!r}")
        return self.lookup_type(word)

    def dims(self, element: TypeDesc) -> TypeDesc:
        dims: list[int] = []
        while self.accept("["):
            dims.append(self.positive_int("array size"))
            self.expect("]")
        if not dims:
            return element
        if isinstance(element, ArrayType):  # typedef'd array: dimensions nest outside-in
            return ArrayType(element.element, (*dims, *element.dims))
        return ArrayType(element, tuple(dims))

    def spec(self, *, closing: bool = False) -> None:
        while True:
            tok = self.peek()
            if tok is None:
                if closing:
                    raise self.error("missing '}'")
                return
            if closing and tok.text == "}":
                return
            if tok.text == ";":
                self.i += 1
                continue
            anns = self.annotations()
            word = self.next().text
            if word == "module":
                name = self.ident("module name")
                self.expect("{")
                self.scope.append(name)
                self.spec(closing=True)
                self.scope.pop()
                self.expect("}")
                self.accept(";")
            elif word == "struct":
                self.struct(anns)
            elif word == "typedef":
                base = self.type_spec()
                name = self.ident("typedef name")
                self.types[self._scoped(name)] = self.dims(base)
                self.expect(";")
            elif word == "const":
                self.type_spec()
                name = self.ident("const name")
                self.expect("=")
                tok2 = self.next()
                if tok2.kind != "number":
                    raise self.error(
                        f"const {name}: only integer literals are supported, found {tok2.text!r}"
                    )
                self.consts[self._scoped(name)] = int(tok2.text, 0)
                self.expect(";")
            elif word in _UNSUPPORTED:
                raise self.error(f"{word!r} is not supported by the IDL subset")
            else:
                self.i -= 1
                raise self.error(f"expected module, struct, typedef or const, found {word!r}")

    def struct(self, anns: list[tuple[str, str | None]]) -> None:
        name = self.ident("struct name")
        ext = "final"
        for a, arg in anns:
            if a in _EXTENSIBILITY:
                ext = a
            elif a == "extensibility" and arg is not None:
                if arg.lower() not in _EXTENSIBILITY:
                    raise self.error(f"struct {name}: unknown extensibility {arg!r}")
                ext = arg.lower()
        if self.accept(";"):  # forward declaration
            return
        if self.accept(":"):
            raise self.error(f"struct {name}: inheritance is not supported")
        self.expect("{")
        members: list[Member] = []
        next_id = 0
        seen: set[str] = set()
        while not self.accept("}"):
            manns = self.annotations()
            base = self.type_spec()
            while True:
                mname = self.ident("member name")
                mtype = self.dims(base)
                mid = next_id
                key = False
                for a, arg in manns:
                    if a == "id" and arg is not None:
                        try:
                            mid = int(arg, 0)
                        except ValueError:
                            raise self.error(f"struct {name}.{mname}: bad @id({arg})") from None
                    elif a == "key":
                        key = arg is None or arg.upper() == "TRUE"
                    elif a in ("optional", "external"):
                        raise self.error(f"struct {name}.{mname}: @{a} is not supported")
                if mname in seen:
                    raise self.error(f"struct {name}: duplicate member {mname!r}")
                seen.add(mname)
                members.append(Member(mname, mtype, mid, key))
                next_id = mid + 1
                manns = [(a, arg) for a, arg in manns if a != "id"]  # @id names the first declarator
                if not self.accept(","):
                    break
            self.expect(";")
        self.accept(";")
        if not members:
            raise self.error(f"struct {name} has no members")
        self.types[self._scoped(name)] = StructType(self._scoped(name), tuple(members), ext)


def parse_idl(text: str, *, where: str = "<idl>") -> dict[str, StructType]:
    """Every struct of an IDL text, by scoped name (``pkg::msg::Name``).

    :raises ConfigError: a syntax error or an unsupported construct (``where:line`` given).
    """
    types: dict[str, TypeDesc] = {}
    parser = _Parser(_tokenize(text, where), where, types, {})
    parser.spec()
    return {name: t for name, t in types.items() if isinstance(t, StructType)}


def parse_type_expr(text: str, types: Mapping[str, TypeDesc], *, where: str = "<type>") -> TypeDesc:
    """One IDL type expression with optional array suffixes: ``double``, ``string<16>``,
    ``sequence<float, 8>``, ``float[3][2]``, ``Vec3``.

    :raises ConfigError: the expression does not parse or names an unknown type.
    """
    parser = _Parser(_tokenize(text, where), where, dict(types), {})
    parser.show_line = False
    if not parser.toks:
        raise ConfigError(f"{where}: empty type")
    t = parser.dims(parser.type_spec())
    if parser.peek() is not None:
        raise parser.error(f"unexpected {parser.peek().text!r} after the type")  # type: ignore[union-attr]
    return t


def struct_from_config(
    name: str, table: Mapping[str, object], types: Mapping[str, TypeDesc], *, where: str
) -> StructType:
    """A struct from a config table ``{extensibility = "final", members = [{name, type, id?, key?}]}``.

    :raises ConfigError: naming ``where`` (the key path) and what is wrong.
    """
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: must be a table")
    unknown = set(table) - {"extensibility", "members"}
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    ext = table.get("extensibility", "final")
    if ext not in _EXTENSIBILITY:
        raise ConfigError(f"{where}.extensibility: must be one of final, appendable, mutable; got {ext!r}")
    raw_members = table.get("members")
    if not isinstance(raw_members, list) or not raw_members:
        raise ConfigError(f"{where}.members: must be a non-empty list of {{name, type}} tables")
    members: list[Member] = []
    next_id = 0
    seen: set[str] = set()
    for i, raw in enumerate(raw_members):
        at = f"{where}.members[{i}]"
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{at}: must be a table with name and type")
        extra = set(raw) - {"name", "type", "id", "key"}
        if extra:
            raise ConfigError(f"{at}: unknown key(s) {', '.join(sorted(extra))}")
        mname = raw.get("name")
        if not isinstance(mname, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", mname):
            raise ConfigError(f"{at}.name: must be an identifier, got {mname!r}")
        if mname in seen:
            raise ConfigError(f"{at}.name: duplicate member {mname!r}")
        seen.add(mname)
        texpr = raw.get("type")
        if not isinstance(texpr, str):
            raise ConfigError(f"{at}.type: must be a type expression string, got {texpr!r}")
        mtype = parse_type_expr(texpr, types, where=f"{at}.type")
        mid = raw.get("id", next_id)
        if not isinstance(mid, int) or isinstance(mid, bool) or not 0 <= mid < (1 << 28):
            raise ConfigError(f"{at}.id: must be an integer in 0..2^28-1, got {mid!r}")
        key = raw.get("key", False)
        if not isinstance(key, bool):
            raise ConfigError(f"{at}.key: must be true or false")
        members.append(Member(mname, mtype, mid, key))
        next_id = mid + 1
    return StructType(name, tuple(members), str(ext))
