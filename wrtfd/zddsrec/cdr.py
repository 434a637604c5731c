"""CDR payload decoding (OMG CDR / DDS-XTypes XCDR1 and XCDR2) for one described struct type.

A payload starts with a 4-byte encapsulation header: a big-endian u16 representation identifier
(which names the endianness and the encoding) and u16 options. Then the top-level struct:

- ``CDR_BE/LE`` (0x0000/0x0001): XCDR1 plain; primitives aligned to their size, at most 8.
- ``PL_CDR_BE/LE`` (0x0002/0x0003): XCDR1 parameter list; each member is a parameter
  (u16 id, u16 length; ``PID_EXTENDED`` 0x3F01 carries u32 id and u32 length), ended by
  ``PID_LIST_END`` 0x3F02. Alignment restarts at each parameter's value (which only matters
  for 8-byte members, as parameter headers keep 4-byte alignment).
- ``CDR2_BE/LE`` (0x0006/0x0007, also the older 0x0010/0x0011): XCDR2 plain; alignment at most 4;
  arrays and sequences of non-primitive elements carry a u32 DHEADER (their byte size).
- ``D_CDR2_BE/LE`` (0x0008/0x0009, 0x0014/0x0015): XCDR2 delimited (appendable): DHEADER, then
  plain members; bytes beyond the known members are skipped.
- ``PL_CDR2_BE/LE`` (0x000a/0x000b, 0x0012/0x0013): XCDR2 mutable: DHEADER, then members each
  with an EMHEADER (must-understand bit, length code, 28-bit member id).

Alignment is relative to the first byte after the encapsulation header. Nested structs follow
their declared extensibility. Values come out as plain Python: dicts for structs, lists for arrays
and sequences, str for strings, int/float/bool for primitives (``char`` as its code).

Speed comes from compiling once per (type, version, endianness): consecutive fixed-size members
are read with one precompiled ``struct.Struct`` per alignment phase, so a struct of twenty
primitives is one ``unpack_from`` call.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from wrtfd.errors import DecodeError
from wrtfd.zddsrec.types import ArrayType, Primitive, SequenceType, StringType, StructType, TypeDesc

__all__ = ["ENCAPSULATIONS", "CdrDecoder", "Encapsulation", "decode_cdr", "parse_encapsulation"]


@dataclass(frozen=True, slots=True)
class Encapsulation:
    """What a representation identifier means."""

    name: str
    version: int  # 1 = XCDR1, 2 = XCDR2
    little: bool
    kind: str  # plain | delimited | plist


def _enc_table() -> dict[int, Encapsulation]:
    table: dict[int, Encapsulation] = {}
    spec = [
        ("CDR", 1, "plain", (0x0000,)),
        ("PL_CDR", 1, "plist", (0x0002,)),
        ("CDR2", 2, "plain", (0x0006, 0x0010)),
        ("D_CDR2", 2, "delimited", (0x0008, 0x0014)),
        ("PL_CDR2", 2, "plist", (0x000A, 0x0012)),
    ]
    for name, version, kind, bases in spec:
        for base in bases:
            table[base] = Encapsulation(f"{name}_BE", version, False, kind)
            table[base | 1] = Encapsulation(f"{name}_LE", version, True, kind)
    return table


#: Representation identifier -> meaning. XTypes 1.2 printed CDR2 ids as 0x10..0x15; deployed
#: implementations use 0x06..0x0b; both are accepted.
ENCAPSULATIONS: dict[int, Encapsulation] = _enc_table()

_PID_EXTENDED = 0x3F01
_PID_LIST_END = 0x3F02
_PID_IGNORE = 0x3F03
_PID_MASK = 0x3FFF
_PID_MUST_UNDERSTAND = 0x4000

_ENC = struct.Struct(">HH")  # representation identifier, options


def parse_encapsulation(payload: bytes) -> Encapsulation:
    """:raises DecodeError: payload shorter than 4 bytes or an unknown representation id."""
    if len(payload) < 4:
        raise DecodeError(
            f"CDR payload of {len(payload)} bytes has no encapsulation header", reason="cdr_truncated"
        )
    rep_id, _options = _ENC.unpack_from(payload, 0)
    enc = ENCAPSULATIONS.get(rep_id)
    if enc is None:
        raise DecodeError(
            f"unknown CDR representation identifier 0x{rep_id:04x}", reason="cdr_unknown_encapsulation"
        )
    return enc


def _truncated(what: str, pos: int, need: int, end: int) -> DecodeError:
    return DecodeError(
        f"CDR payload truncated reading {what} at offset {pos + 4}: "
        f"need {need} bytes, {max(0, end - pos)} left",
        reason="cdr_truncated",
    )


def _default(t: TypeDesc) -> Any:
    """Value of a member absent from a parameter list (mutable types): zero, empty, or nested."""
    if isinstance(t, Primitive):
        return False if t.code == "?" else (0.0 if t.code in "fd" else 0)
    if isinstance(t, StringType):
        return ""
    if isinstance(t, SequenceType):
        return []
    if isinstance(t, ArrayType):
        return [_default(t.element) for _ in range(t.length)]
    return {m.name: _default(m.type) for m in t.members}


# A reader takes (buf, pos, end) and returns (value, new_pos). ``buf`` starts after the
# encapsulation header, so alignment is ``pos % align``.
Reader = Callable[[memoryview, int, int], tuple[Any, int]]
# A builder rebuilds one fixed-size value from the flat tuple of unpacked primitives.
Builder = Callable[[tuple[Any, ...], int], tuple[Any, int]]


class _Compiler:
    """Compiles type descriptions into readers for one XCDR version and endianness."""

    def __init__(self, version: int, little: bool, max_string_bytes: int, max_sequence_len: int) -> None:
        self.version = version
        self.max_align = 8 if version == 1 else 4
        self.bo = "<" if little else ">"
        self.max_string = max_string_bytes
        self.max_seq = max_sequence_len
        self.u32 = struct.Struct(self.bo + "I")
        self.u16x2 = struct.Struct(self.bo + "HH")
        self._readers: dict[tuple[int, str], Reader] = {}

    # ----------------------------------------------------------- fixed-size layout

    def is_fixed(self, t: TypeDesc) -> bool:
        if isinstance(t, Primitive):
            return True
        if isinstance(t, ArrayType):
            if isinstance(t.element, Primitive):
                return True
            # XCDR2 puts a DHEADER before arrays of non-primitive elements.
            return self.version == 1 and self.is_fixed(t.element)
        if isinstance(t, StructType):
            plain = t.extensibility != "mutable" if self.version == 1 else t.extensibility == "final"
            return plain and all(self.is_fixed(m.type) for m in t.members)
        return False

    def leaves(self, t: TypeDesc) -> list[Primitive]:
        if isinstance(t, Primitive):
            return [t]
        if isinstance(t, ArrayType):
            return self.leaves(t.element) * t.length
        if isinstance(t, StructType):
            out: list[Primitive] = []
            for m in t.members:
                out.extend(self.leaves(m.type))
            return out
        raise TypeError(f"not a fixed-size type: {t!r}")

    def builder(self, t: TypeDesc) -> Builder:
        if isinstance(t, Primitive):
            return lambda vals, i: (vals[i], i + 1)
        if isinstance(t, ArrayType):
            n = t.length
            if isinstance(t.element, Primitive):
                return lambda vals, i: (list(vals[i : i + n]), i + n)
            elem = self.builder(t.element)

            def build_array(vals: tuple[Any, ...], i: int) -> tuple[Any, int]:
                out = []
                for _ in range(n):
                    v, i = elem(vals, i)
                    out.append(v)
                return out, i

            return build_array
        if isinstance(t, StructType):
            parts = [(m.name, self.builder(m.type)) for m in t.members]

            def build_struct(vals: tuple[Any, ...], i: int) -> tuple[Any, int]:
                out = {}
                for name, b in parts:
                    out[name], i = b(vals, i)
                return out, i

            return build_struct
        raise TypeError(f"not a fixed-size type: {t!r}")

    def fixed_run(
        self, members: list[tuple[str, TypeDesc]], where: str
    ) -> Callable[[memoryview, int, int, dict[str, Any]], int]:
        """A run of fixed-size members read with one Struct per alignment phase."""
        leaves: list[Primitive] = []
        for _, t in members:
            leaves.extend(self.leaves(t))
        run_align = min(max(p.size for p in leaves), self.max_align)
        first_align = min(leaves[0].size, self.max_align)
        structs: dict[int, struct.Struct] = {}
        bo = self.bo
        max_align = self.max_align

        def layout(phase: int) -> struct.Struct:
            fmt = [bo]
            pos = phase
            for p in leaves:
                a = min(p.size, max_align)
                pad = (-pos) % a
                if pad:
                    fmt.append(f"{pad}x")
                fmt.append(p.code)
                pos += pad + p.size
            return struct.Struct("".join(fmt))

        for phase in range(0, run_align, first_align):
            structs[phase] = layout(phase)
        names = [name for name, _ in members]
        all_scalars = all(isinstance(t, Primitive) for _, t in members)
        builders = [(name, self.builder(t)) for name, t in members]

        def read_run(buf: memoryview, pos: int, end: int, out: dict[str, Any]) -> int:
            pos += (-pos) % first_align
            st = structs[pos % run_align]
            if pos + st.size > end:
                raise _truncated(where, pos, st.size, end)
            vals = st.unpack_from(buf, pos)
            if all_scalars:
                out.update(zip(names, vals, strict=False))
            else:
                i = 0
                for name, b in builders:
                    out[name], i = b(vals, i)
            return pos + st.size

        return read_run

    # ----------------------------------------------------------- general readers

    def reader(self, t: TypeDesc, where: str) -> Reader:
        if isinstance(t, StructType):
            key = (id(t), where)
            cached = self._readers.get(key)
            if cached is not None:
                return cached
            r = self.struct_reader(t, t.extensibility, where)
            self._readers[key] = r
            return r
        if isinstance(t, Primitive | ArrayType) and self.is_fixed(t):
            run = self.fixed_run([("v", t)], where)

            def read_fixed(buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
                box: dict[str, Any] = {}
                pos = run(buf, pos, end, box)
                return box["v"], pos

            return read_fixed
        if isinstance(t, StringType):
            return self.string_reader(t, where)
        if isinstance(t, SequenceType):
            return self.sequence_reader(t, where)
        if isinstance(t, ArrayType):
            return self.array_reader(t, where)
        raise TypeError(f"unsupported type {t!r}")

    def dheader(self, buf: memoryview, pos: int, end: int, where: str) -> tuple[int, int]:
        """Read a DHEADER; return (position after it, end of the delimited object)."""
        pos += (-pos) % 4
        if pos + 4 > end:
            raise _truncated(f"{where} DHEADER", pos, 4, end)
        (size,) = self.u32.unpack_from(buf, pos)
        pos += 4
        if pos + size > end:
            raise DecodeError(
                f"{where}: DHEADER says {size} bytes at offset {pos}, only {end - pos} left",
                reason="cdr_bad_dheader",
            )
        return pos, pos + size

    def string_reader(self, t: StringType, where: str) -> Reader:
        u32 = self.u32
        limit = self.max_string if t.bound is None else min(self.max_string, t.bound + 1)

        def read_string(buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
            pos += (-pos) % 4
            if pos + 4 > end:
                raise _truncated(where, pos, 4, end)
            (n,) = u32.unpack_from(buf, pos)
            pos += 4
            if n > limit:
                raise DecodeError(
                    f"{where}: string of {n} bytes exceeds its bound of {limit}", reason="cdr_string_too_long"
                )
            if pos + n > end:
                raise _truncated(where, pos, n, end)
            raw = bytes(buf[pos : pos + n])
            if raw.endswith(b"\x00"):
                raw = raw[:-1]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise DecodeError(f"{where}: string is not UTF-8", reason="cdr_bad_string") from None
            return text, pos + n

        return read_string

    def _count_limit(self, bound: int | None) -> int:
        return self.max_seq if bound is None else min(bound, self.max_seq)

    def sequence_reader(self, t: SequenceType, where: str) -> Reader:
        u32 = self.u32
        limit = self._count_limit(t.bound)
        elem_t = t.element
        version = self.version
        if isinstance(elem_t, Primitive):
            code = elem_t.code
            size = elem_t.size
            align = min(size, self.max_align)
            bo = self.bo

            def read_prim_seq(buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
                pos += (-pos) % 4
                if pos + 4 > end:
                    raise _truncated(where, pos, 4, end)
                (n,) = u32.unpack_from(buf, pos)
                pos += 4
                if n > limit:
                    raise DecodeError(
                        f"{where}: sequence of {n} exceeds its bound of {limit}",
                        reason="cdr_sequence_too_long",
                    )
                if n == 0:
                    return [], pos
                pos += (-pos) % align
                nbytes = n * size
                if pos + nbytes > end:
                    raise _truncated(where, pos, nbytes, end)
                return list(struct.unpack_from(f"{bo}{n}{code}", buf, pos)), pos + nbytes

            return read_prim_seq
        elem = self.reader(elem_t, f"{where}[]")
        min_size = 1

        def read_seq(buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
            stop = end
            if version == 2:
                pos, stop = self.dheader(buf, pos, end, where)
            pos += (-pos) % 4
            if pos + 4 > stop:
                raise _truncated(where, pos, 4, stop)
            (n,) = u32.unpack_from(buf, pos)
            pos += 4
            if n > limit:
                raise DecodeError(
                    f"{where}: sequence of {n} exceeds its bound of {limit}", reason="cdr_sequence_too_long"
                )
            if n * min_size > stop - pos:
                raise _truncated(where, pos, n * min_size, stop)
            out = []
            for _ in range(n):
                v, pos = elem(buf, pos, stop)
                out.append(v)
            return out, (stop if version == 2 else pos)

        return read_seq

    def array_reader(self, t: ArrayType, where: str) -> Reader:
        n = t.length
        elem = self.reader(t.element, f"{where}[]")
        version = self.version

        def read_array(buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
            stop = end
            if version == 2:
                pos, stop = self.dheader(buf, pos, end, where)
            out = []
            for _ in range(n):
                v, pos = elem(buf, pos, stop)
                out.append(v)
            return out, (stop if version == 2 else pos)

        return read_array

    def struct_reader(self, t: StructType, kind: str, where: str) -> Reader:
        """``kind``: the struct's extensibility, or for the top level what the encapsulation says."""
        if kind == "mutable" or kind == "plist":
            return self.plist_reader(t, where) if self.version == 1 else self.mutable2_reader(t, where)
        plain = self.plain_struct_reader(t, where)
        if self.version == 2 and kind in ("appendable", "delimited"):

            def read_delimited(buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
                pos, stop = self.dheader(buf, pos, end, where)
                value, _ = plain(buf, pos, stop)
                return value, stop

            return read_delimited
        return plain

    def plain_struct_reader(self, t: StructType, where: str) -> Reader:
        steps: list[Callable[[memoryview, int, int, dict[str, Any]], int]] = []
        run: list[tuple[str, TypeDesc]] = []

        def flush() -> None:
            if run:
                steps.append(self.fixed_run(list(run), f"{where}.{run[0][0]}"))
                run.clear()

        for m in t.members:
            if self.is_fixed(m.type):
                run.append((m.name, m.type))
                continue
            flush()
            steps.append(self._member_step(m.name, self.reader(m.type, f"{where}.{m.name}")))
        flush()
        if len(steps) == 1:
            only = steps[0]

            def read_one(buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
                out: dict[str, Any] = {}
                return out, only(buf, pos, end, out)

            return read_one

        def read_struct(buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
            out: dict[str, Any] = {}
            for step in steps:
                pos = step(buf, pos, end, out)
            return out, pos

        return read_struct

    @staticmethod
    def _member_step(name: str, r: Reader) -> Callable[[memoryview, int, int, dict[str, Any]], int]:
        def step(buf: memoryview, pos: int, end: int, out: dict[str, Any]) -> int:
            out[name], pos = r(buf, pos, end)
            return pos

        return step

    def _by_id(self, t: StructType, where: str) -> dict[int, tuple[str, Reader]]:
        return {m.member_id: (m.name, self.reader(m.type, f"{where}.{m.name}")) for m in t.members}

    def plist_reader(self, t: StructType, where: str) -> Reader:
        """XCDR1 parameter list (PL_CDR)."""
        by_id = self._by_id(t, where)
        hdr = self.u16x2
        u32 = self.u32
        members = t.members

        def read_plist(buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
            out: dict[str, Any] = {}
            while True:
                pos += (-pos) % 4
                if pos + 4 > end:
                    raise _truncated(f"{where} parameter header", pos, 4, end)
                pid, length = hdr.unpack_from(buf, pos)
                pos += 4
                pid_value = pid & _PID_MASK
                if pid_value == _PID_LIST_END:
                    break
                if pid_value == _PID_EXTENDED:
                    if pos + 8 > end:
                        raise _truncated(f"{where} extended parameter header", pos, 8, end)
                    member_id = u32.unpack_from(buf, pos)[0] & 0x0FFFFFFF
                    length = u32.unpack_from(buf, pos + 4)[0]
                    pos += 8
                else:
                    member_id = pid_value
                stop = pos + length
                if stop > end:
                    raise _truncated(f"{where} parameter {member_id}", pos, length, end)
                entry = by_id.get(member_id) if pid_value != _PID_IGNORE else None
                if entry is not None:
                    name, r = entry
                    # A parameter's value is aligned from its own first byte.
                    out[name], _ = r(buf[pos:stop], 0, length)
                elif pid & _PID_MUST_UNDERSTAND:
                    raise _must_understand(where, member_id)
                pos = stop
            _fill_absent(out, members)
            return out, pos

        return read_plist

    def mutable2_reader(self, t: StructType, where: str) -> Reader:
        """XCDR2 mutable (PL_CDR2): DHEADER, then EMHEADER-prefixed members."""
        by_id = self._by_id(t, where)
        u32 = self.u32
        members = t.members

        def read_mutable(buf: memoryview, pos: int, end: int) -> tuple[Any, int]:
            pos, stop = self.dheader(buf, pos, end, where)
            out: dict[str, Any] = {}
            while pos < stop:
                pos += (-pos) % 4
                if pos + 4 > stop:
                    raise _truncated(f"{where} EMHEADER", pos, 4, stop)
                (em,) = u32.unpack_from(buf, pos)
                pos += 4
                lc = (em >> 28) & 0x7
                member_id = em & 0x0FFFFFFF
                if lc < 4:
                    value_at = pos
                    m_end = pos + (1 << lc)
                else:
                    if pos + 4 > stop:
                        raise _truncated(f"{where} NEXTINT", pos, 4, stop)
                    (nextint,) = u32.unpack_from(buf, pos)
                    scale = {4: 1, 5: 1, 6: 4, 7: 8}[lc]
                    m_end = pos + 4 + nextint * scale
                    value_at = (
                        pos + 4 if lc == 4 else pos
                    )  # LC 5..7: the NEXTINT is the member's own first word
                if m_end > stop:
                    raise _truncated(f"{where} member {member_id}", pos, m_end - pos, stop)
                entry = by_id.get(member_id)
                if entry is not None:
                    name, r = entry
                    out[name], _ = r(buf, value_at, m_end)
                elif em >> 31:
                    raise _must_understand(where, member_id)
                pos = m_end
            _fill_absent(out, members)
            return out, stop

        return read_mutable


def _must_understand(where: str, member_id: int) -> DecodeError:
    """A mutable struct member we do not know, flagged must-understand: the sample is unusable."""
    return DecodeError(
        f"{where}: unknown must-understand member id {member_id}", reason="cdr_must_understand"
    )


def _fill_absent(out: dict[str, Any], members: Sequence[Any]) -> None:
    """Members a mutable struct's sender left out take their type's default value."""
    for m in members:
        if m.name not in out:
            out[m.name] = _default(m.type)


class CdrDecoder:
    """Decodes CDR payloads of one struct type; compiled lazily per encoding variant.

    :param max_string_bytes: cap on any string (bytes, NUL included), whatever its IDL bound.
    :param max_sequence_len: cap on any sequence's element count, whatever its IDL bound.
    """

    __slots__ = ("_compilers", "_flat", "_top", "max_sequence_len", "max_string_bytes", "type")

    def __init__(
        self, struct_type: StructType, *, max_string_bytes: int = 1 << 20, max_sequence_len: int = 1 << 20
    ) -> None:
        self.type = struct_type
        self.max_string_bytes = max_string_bytes
        self.max_sequence_len = max_sequence_len
        self._compilers: dict[tuple[int, bool], _Compiler] = {}
        self._top: dict[int, Reader] = {}
        # Plain encodings of a struct of scalar primitives: (Struct of the body, member names).
        self._flat: dict[int, tuple[struct.Struct, tuple[str, ...]]] = {}

    def _reader(self, rep_id: int, enc: Encapsulation) -> Reader:
        key = (enc.version, enc.little)
        comp = self._compilers.get(key)
        if comp is None:
            comp = _Compiler(enc.version, enc.little, self.max_string_bytes, self.max_sequence_len)
            self._compilers[key] = comp
        r = comp.struct_reader(self.type, enc.kind, self.type.name)
        self._top[rep_id] = r
        members = self.type.members
        prims = [m.type for m in members if isinstance(m.type, Primitive)]
        if enc.kind == "plain" and len(prims) == len(members):
            # The body starts at alignment phase 0: one Struct, no per-call alignment work.
            fmt = comp.bo
            pos = 0
            for p in prims:
                pad = (-pos) % min(p.size, comp.max_align)
                fmt += f"{pad}x{p.code}" if pad else p.code
                pos += pad + p.size
            self._flat[rep_id] = (struct.Struct(fmt), tuple(m.name for m in members))
        return r

    def decode(self, payload: bytes) -> dict[str, Any]:
        """Decode one payload (encapsulation header included) into a dict of member values.

        :raises DecodeError: unknown encapsulation, truncated data, a bound exceeded, bad UTF-8.
        """
        n = len(payload)
        if n < 4:
            raise DecodeError(f"CDR payload of {n} bytes has no encapsulation header", reason="cdr_truncated")
        rep_id = (payload[0] << 8) | payload[1]
        flat = self._flat.get(rep_id)
        if flat is not None:
            st, names = flat
            if n - 4 < st.size:
                raise _truncated(self.type.name, 0, st.size, n - 4)
            return dict(zip(names, st.unpack_from(payload, 4), strict=False))  # same length by construction
        r = self._top.get(rep_id)
        if r is None:
            r = self._reader(rep_id, parse_encapsulation(payload))
        value, _ = r(memoryview(payload)[4:], 0, n - 4)
        return value


def decode_cdr(payload: bytes, struct_type: StructType) -> dict[str, Any]:
    """One-off decode; build a :class:`CdrDecoder` to decode many payloads of a type."""
    return CdrDecoder(struct_type).decode(payload)
