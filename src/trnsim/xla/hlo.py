"""HLO text, as torch-xla (`_get_xla_tensors_hlo`, XLA_SAVE_TENSORS_FMT=hlo) and JAX (`.as_text()`) print it.

Only what pricing needs is kept: each instruction's name, opcode, result shape(s), operand names and
attributes, and the source line XLA records in its metadata. Both printers' spellings are accepted
(`%name` or `name`, operands with or without their shapes, `ENTRY %main (...) -> ... {` or `main {`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from math import prod

from trnsim.errors import TrnsimError

# bytes per element of each HLO element type
ELEMENT_BYTES = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "s32": 4, "u32": 4, "s64": 8,
                 "u64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1,
                 "f8e4m3": 1, "f8e4m3fnuz": 1, "f8e5m2fnuz": 1, "token": 0}

# Every pattern is linear in the line's length: an element type starts only where a word starts, and a
# computation's header is its name then the rest of the line checked by hand (a backtracking pattern over
# its signature took seconds on one long line).
_ARRAY = re.compile(r"(?<![a-z0-9])([a-z][a-z0-9]*)\[([0-9,\s]*)\]")
_INSTR = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*")
_HEADER = re.compile(r"\s*(ENTRY\s+)?%?([\w.\-]+)\s*")
MAX_DIGITS = 18  # a dimension longer than this exceeds any memory (and int() refuses 4,300 digits)


class HloParseError(TrnsimError, ValueError):
    """HLO text that trnsim cannot read: names the line."""


@dataclass(frozen=True)
class Array:
    """One array result: element type and dimensions."""

    dtype: str
    dims: tuple[int, ...]

    @property
    def elems(self) -> int:
        return prod(self.dims)

    @property
    def nbytes(self) -> float:
        return self.elems * ELEMENT_BYTES.get(self.dtype, 4)


@dataclass
class Instruction:
    name: str
    opcode: str
    shapes: tuple[Array, ...]  # one array, or the members of a tuple result
    operands: tuple[str, ...]
    attrs: str = ""
    root: bool = False

    @property
    def nbytes(self) -> float:
        return sum(a.nbytes for a in self.shapes)

    @property
    def elems(self) -> int:
        return sum(a.elems for a in self.shapes)

    def attr(self, key: str) -> str | None:
        """The raw text of attribute `key` (`lhs_contracting_dims` -> `{1}`), or None."""
        m = re.search(rf"(?:^|[\s,]){re.escape(key)}=", self.attrs)
        if not m:
            return None
        i, depth, start = m.end(), 0, m.end()
        while i < len(self.attrs):
            c = self.attrs[i]
            if c in "{([":
                depth += 1
            elif c in "})]":
                depth -= 1
            elif c == "," and depth == 0:
                break
            i += 1
        return self.attrs[start:i].strip()

    def dims_attr(self, key: str) -> tuple[int, ...]:
        text = self.attr(key)
        return tuple(int(x) for x in re.findall(r"\d+", text)) if text else ()

    @property
    def source(self) -> str | None:
        """`file:line` from the metadata, where the printer recorded it."""
        f = re.search(r'source_file="([^"]*)"', self.attrs)
        ln = re.search(r"source_line=(\d+)", self.attrs)
        return f"{f.group(1)}:{ln.group(1)}" if f and ln else None


@dataclass
class Computation:
    name: str
    entry: bool
    instructions: list[Instruction] = field(default_factory=list)

    def by_name(self) -> dict[str, Instruction]:
        return {i.name: i for i in self.instructions}


@dataclass
class Module:
    name: str
    computations: dict[str, Computation]

    @property
    def entry(self) -> Computation:
        for c in self.computations.values():
            if c.entry:
                return c
        return list(self.computations.values())[-1]  # printers without ENTRY put the main computation last


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets."""
    parts, depth, cur = [], 0, []
    for c in text:
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def _closing(text: str, i: int) -> int:
    """Index just past the bracket that closes the one at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] in "{([":
            depth += 1
        elif text[j] in "})]":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def parse_shape(text: str, where: str = "HLO") -> tuple[Array, ...]:
    """`f32[8,16]{1,0}` or `(f32[8], s32[])` -> the arrays (layouts ignored)."""
    out = []
    for t, dims in _ARRAY.findall(text):
        ds = [d for d in dims.replace(" ", "").split(",") if d]
        if any(len(d) > MAX_DIGITS for d in ds):
            big = max(ds, key=len)
            raise HloParseError(f"{where}: a dimension of {len(big)} digits ({big[:12]}...) in {t}[...]: "
                                f"more elements than any memory holds (at most {MAX_DIGITS} digits)")
        out.append(Array(t, tuple(int(d) for d in ds)))
    return tuple(out)


def _header(line: str) -> re.Match | None:
    """A computation's first line: `[ENTRY] [%]name [(params)] [-> result] {`."""
    if not line.rstrip().endswith("{"):
        return None
    h = _HEADER.match(line)
    return h if h and line[h.end():].startswith(("(", "->", "{")) else None


def _instruction(line: str, lineno: int) -> Instruction:
    m = _INSTR.match(line)
    rest = line[m.end():]
    # the result shape: a tuple in parentheses, or one array with an optional layout
    if rest.startswith("("):
        end = _closing(rest, 0)
    else:
        sm = re.match(r"[a-z][a-z0-9]*\[[0-9,\s]*\](\{[^}]*\})?", rest)
        if not sm:
            raise HloParseError(f"HLO line {lineno}: cannot read the result shape in {line.strip()[:120]!r}")
        end = sm.end()
    shapes = parse_shape(rest[:end], f"HLO line {lineno}")
    om = re.match(r"\s*([\w\-]+)\(", rest[end:])
    if not om:
        raise HloParseError(f"HLO line {lineno}: cannot read the opcode in {line.strip()[:120]!r}")
    opcode = om.group(1)
    start = end + om.end() - 1
    close = _closing(rest, start)
    operands = tuple(p.split()[-1].lstrip("%") for p in _split_top(rest[start + 1:close - 1]) if p.split())
    attrs = rest[close:].lstrip(", ").strip()
    return Instruction(m.group(2), opcode, shapes, operands, attrs, bool(m.group(1)))


def parse(text: str) -> Module:
    """Parse one HLO module's text."""
    name, comps, cur = "module", {}, None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("//"):
            continue
        if s.startswith("HloModule"):
            name = s.split()[1].rstrip(",") if len(s.split()) > 1 else name
            continue
        if cur is None:
            h = _header(line)
            if h:
                cur = Computation(h.group(2), bool(h.group(1)))
                comps[cur.name] = cur
            continue
        if s == "}":
            cur = None
            continue
        if _INSTR.match(line):
            cur.instructions.append(_instruction(line, n))
    if not comps:
        raise HloParseError("no HLO computation found in the text")
    return Module(name, comps)


def check(comp: Computation) -> None:
    """The rules pricing relies on, as XLA's verifier states them: names unique, every operand defined before
    its user (so no cycle), and a dot's or a convolution's two operands single arrays whose named dimensions
    exist. HloParseError names the instruction otherwise."""
    seen: dict[str, Instruction] = {}
    names = {i.name for i in comp.instructions}
    for ins in comp.instructions:
        if ins.name in seen:
            raise HloParseError(f"HLO computation {comp.name}: instruction {ins.name} is defined twice")
        later = [o for o in ins.operands if o in names and o not in seen]
        if later:
            raise HloParseError(f"HLO computation {comp.name}: {ins.name} uses {later[0]} before it is defined "
                                "(operands come before their users; a cycle has no order)")
        if ins.opcode in ("dot", "convolution"):
            _check_contraction(comp, ins, seen)
        seen[ins.name] = ins


def _check_contraction(comp: Computation, ins: Instruction, defined: dict[str, Instruction]) -> None:
    where = f"HLO computation {comp.name}: {ins.opcode} {ins.name}"
    if len(ins.operands) < 2 or any(o not in defined for o in ins.operands[:2]):
        raise HloParseError(f"{where} needs two operands defined in the computation, got {list(ins.operands)}")
    shapes = [defined[o].shapes for o in ins.operands[:2]]
    if len(ins.shapes) != 1 or any(len(s) != 1 for s in shapes):
        raise HloParseError(f"{where}: its operands and result must be single arrays")
    for side, shape in zip(("lhs", "rhs"), shapes):
        rank = len(shape[0].dims)
        for key in (f"{side}_batch_dims", f"{side}_contracting_dims"):
            bad = [d for d in ins.dims_attr(key) if d >= rank]
            if ins.opcode == "dot" and bad:
                raise HloParseError(f"{where}: {key} names dimension {bad[0]} of a rank-{rank} operand")
    groups = ins.attr("feature_group_count")
    if groups is not None and not (groups.isdigit() and len(groups) <= MAX_DIGITS and int(groups) >= 1):
        raise HloParseError(f"{where}: feature_group_count={groups}, not a positive integer")
