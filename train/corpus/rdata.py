"""Read the character vectors of an R package's data, without R.

Debian packages some public-domain texts as R data (``r-cran-janeaustenr``: Jane Austen's six
novels, one string per line).  R stores a package's data as a lazy-load database: ``Rdata.rdx``
(a gzip-compressed serialized list naming each variable's offset and length) and ``Rdata.rdb``
(each variable a 4-byte big-endian length and a zlib stream of R's XDR serialization, formats 2
and 3).  This reads the subset of that serialization data vectors use (vectors, lists and their
names, pairlists, symbols, references, compact sequences); anything else (closures, promises,
byte code, other ALTREP classes) is an ``RDataError`` naming the file, never a crash or a hang:
lengths are checked against the bytes left, nesting and expanded sequences are bounded.
"""

import os
import struct
import zlib
from typing import Any, Dict, List, Optional

MAX_DEPTH = 200
MAX_SEQUENCE = 1 << 24  # a compact sequence is expanded: bounded
MAX_BLOB = 1 << 30  # bytes one variable or the index may unpack to


class RDataError(ValueError):
    pass


# Serialization type codes (R's serialize.c)
SYMSXP, LISTSXP, ENVSXP, LANGSXP = 1, 2, 4, 6  # not closures (3) or promises (5): refused
CHARSXP, LGLSXP, INTSXP, REALSXP, CPLXSXP, STRSXP, DOTSXP = 9, 10, 13, 14, 15, 16, 17
VECSXP, EXPRSXP, RAWSXP, S4SXP = 19, 20, 24, 25
REFSXP, NILVALUE_SXP, GLOBALENV_SXP, UNBOUNDVALUE_SXP, MISSINGARG_SXP = 255, 254, 253, 252, 251
BASENAMESPACE_SXP, EMPTYENV_SXP, BASEENV_SXP, ATTRLANGSXP, ATTRLISTSXP, ALTREP_SXP = 250, 242, 241, 240, 239, 238
NAMESPACESXP, PACKAGESXP, PERSISTSXP = 249, 248, 247
_SINGLETONS = {NILVALUE_SXP, GLOBALENV_SXP, UNBOUNDVALUE_SXP, MISSINGARG_SXP, BASENAMESPACE_SXP,
               EMPTYENV_SXP, BASEENV_SXP}
_PAIRS = {LISTSXP, LANGSXP, DOTSXP, ATTRLANGSXP, ATTRLISTSXP}
NA_STRING = None


class RList(list):
    """A list (VECSXP) or pairlist, with its names when it has them."""

    names: Optional[List[Optional[str]]] = None


class _Reader:
    def __init__(self, data: bytes, where: str):
        self.b, self.i, self.where = data, 0, where
        self.refs: List[Any] = []

    def fail(self, msg: str) -> RDataError:
        return RDataError(f"{self.where}: {msg} (at byte {self.i})")

    def take(self, n: int) -> bytes:
        if n < 0 or self.i + n > len(self.b):
            raise self.fail(f"wants {n} bytes, {len(self.b) - self.i} left: truncated or not R data")
        out = self.b[self.i:self.i + n]
        self.i += n
        return out

    def int(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def length(self, width: int) -> int:
        n = self.int()
        if n == -1:
            hi, lo = self.int(), self.int()
            n = (hi << 32) + (lo & 0xFFFFFFFF)
        if n < 0 or n * width > len(self.b) - self.i:
            raise self.fail(f"a vector of {n} elements does not fit in the {len(self.b) - self.i} bytes left")
        return n

    def header(self) -> None:
        if self.take(2) != b"X\n":
            raise self.fail("not R's XDR serialization (no 'X\\n' header)")
        version = self.int()
        self.int(), self.int()  # the writer's and the oldest reader's R versions
        if version == 3:
            self.take(self.length(1))  # the native encoding's name
        elif version != 2:
            raise self.fail(f"serialization format {version} (want 2 or 3)")

    def item(self, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH}")
        flags = self.int()
        t = flags & 0xFF
        has_attr, has_tag = bool(flags & (1 << 9)), bool(flags & (1 << 10))
        if t in _SINGLETONS:
            return None
        if t == REFSXP:
            k = flags >> 8 or self.int()
            if not 1 <= k <= len(self.refs):
                raise self.fail(f"reference {k} to one of {len(self.refs)} objects")
            return self.refs[k - 1]
        if t in (PERSISTSXP, NAMESPACESXP, PACKAGESXP):
            if self.int() != 0:  # R's InStringVec: a 0, then the name's strings
                raise self.fail("a persistent name with attributes")
            for _ in range(self.length(4)):
                self.item(depth + 1)
            self.refs.append(None)  # a namespace or package by name: not data
            return None
        if t == SYMSXP:
            name = self.item(depth + 1)
            self.refs.append(name)
            return name
        if t == ENVSXP:
            self.int()  # locked
            env: Dict[str, Any] = {}
            self.refs.append(env)
            for _ in range(4):  # enclosure, frame, hash table, attributes
                self.item(depth + 1)
            return env
        if t in _PAIRS:
            out = RList()
            names: List[Optional[str]] = []
            while True:
                if has_attr:
                    self.item(depth + 1)
                names.append(self.item(depth + 1) if has_tag else None)
                out.append(self.item(depth + 1))
                flags = self.int()  # the CDR: the next cell, or the end
                t = flags & 0xFF
                has_attr, has_tag = bool(flags & (1 << 9)), bool(flags & (1 << 10))
                if t not in _PAIRS:
                    if t not in _SINGLETONS:
                        raise self.fail(f"a pairlist ends in type {t}")
                    break
            if any(n is not None for n in names):
                out.names = [n if isinstance(n, str) else None for n in names]
            return out
        if t == CHARSXP:
            n = self.int()
            latin1 = bool(flags & (1 << 14))  # R's LATIN1_MASK among the levels (bits 12 on)
            text = NA_STRING if n == -1 else self.take(n).decode("latin-1" if latin1 else "utf-8", "replace")
            if has_attr:  # older R wrote a CHARSXP's attributes; R reads and ignores them
                self.item(depth + 1)
            return text
        if t in (LGLSXP, INTSXP):
            n = self.length(4)
            v: Any = list(struct.unpack(f">{n}i", self.take(4 * n)))
        elif t == REALSXP:
            n = self.length(8)
            v = list(struct.unpack(f">{n}d", self.take(8 * n)))
        elif t == CPLXSXP:
            n = self.length(16)
            v = list(struct.unpack(f">{2 * n}d", self.take(16 * n)))
        elif t == RAWSXP:
            v = self.take(self.length(1))
        elif t == STRSXP:
            n = self.length(4)
            v = [self.item(depth + 1) for _ in range(n)]
        elif t in (VECSXP, EXPRSXP):
            n = self.length(4)
            v = RList(self.item(depth + 1) for _ in range(n))
        elif t == S4SXP:
            v = None
        elif t == ALTREP_SXP:
            info = self.item(depth + 1)  # class, package, type
            state = self.item(depth + 1)
            self.item(depth + 1)  # attributes
            return self.altrep(info, state)
        else:
            raise self.fail(f"R type {t} is not data this reader knows")
        if has_attr:
            attrs = self.item(depth + 1)
            if isinstance(v, RList) and isinstance(attrs, RList) and attrs.names and "names" in attrs.names:
                names = attrs[attrs.names.index("names")]
                if (isinstance(names, list) and len(names) == len(v)
                        and all(n is None or isinstance(n, str) for n in names)):
                    v.names = list(names)
        return v

    def altrep(self, info: Any, state: Any) -> Any:
        """The value an ALTREP object stands for: compact sequences expanded, wrappers
        unwrapped; other classes (deferred strings, memory maps) are refused."""
        cls = info[0] if isinstance(info, RList) and info and isinstance(info[0], str) else None
        if cls in ("compact_intseq", "compact_realseq"):
            if not (isinstance(state, list) and len(state) == 3 and all(isinstance(x, (int, float)) for x in state)):
                raise self.fail(f"ALTREP {cls} without its length, start and step")
            n, start, step = state
            if not 0 <= n <= MAX_SEQUENCE:
                raise self.fail(f"ALTREP {cls} of {n} elements")
            return [start + i * step for i in range(int(n))]
        if cls is not None and cls.startswith("wrap_") and isinstance(state, list) and state:
            return state[0]
        raise self.fail(f"ALTREP class {cls!r} is not data this reader knows")


def unserialize(data: bytes, where: str = "R data") -> Any:
    r = _Reader(data, where)
    r.header()
    return r.item()


def lazyload(path: str) -> Dict[str, Any]:
    """Every variable of a lazy-load database (``path`` without ``.rdx``/``.rdb``), by name."""
    rdx, rdb = path + ".rdx", path + ".rdb"
    try:
        with open(rdx, "rb") as f:
            raw = f.read()
        with open(rdb, "rb") as f:
            blobs = f.read()
    except OSError as e:
        raise RDataError(f"{path}: {e}") from e
    try:
        gz = raw[:2] == b"\x1f\x8b"
        inflate = zlib.decompressobj(31 if gz else 15)
        data = inflate.decompress(raw if gz else raw[4:], MAX_BLOB + 1)
        if len(data) > MAX_BLOB:
            raise RDataError(f"{rdx}: an index of over {MAX_BLOB} bytes")
        index = unserialize(data, rdx)
    except (OSError, EOFError, zlib.error) as e:
        raise RDataError(f"{rdx}: not a compressed index: {e}") from e
    if not isinstance(index, RList) or not index.names or "variables" not in index.names:
        raise RDataError(f"{rdx}: no variables in the index")
    variables = index[index.names.index("variables")]
    if not isinstance(variables, RList) or variables.names is None or None in variables.names:
        raise RDataError(f"{rdx}: variables are not a named list")
    out = {}
    for name, where in zip(variables.names, variables):
        if not (isinstance(where, list) and len(where) == 2 and all(isinstance(x, int) for x in where)):
            raise RDataError(f"{rdx}: variable {name!r} has no offset and length")
        off, n = where
        blob = blobs[off:off + n]
        if off < 0 or n < 5 or len(blob) != n:
            raise RDataError(f"{rdb}: variable {name!r} at {off}+{n} lies outside the file's {len(blobs)} bytes")
        want = struct.unpack(">I", blob[:4])[0]
        if want > MAX_BLOB:
            raise RDataError(f"{rdb}: variable {name!r} would unpack to {want} bytes (at most {MAX_BLOB})")
        try:
            d = zlib.decompressobj()
            data = d.decompress(blob[4:], want + 1)
        except zlib.error as e:
            raise RDataError(f"{rdb}: variable {name!r}: {e}") from e
        if len(data) != want:
            raise RDataError(f"{rdb}: variable {name!r} unpacks to {len(data)} bytes, its header says {want}")
        out[name] = unserialize(data, f"{rdb}: {name}")
    return out


def strings(path: str) -> Dict[str, List[Optional[str]]]:
    """The character vectors of a lazy-load database, by name (other variables left out)."""
    return {k: v for k, v in lazyload(path).items()
            if isinstance(v, list) and not isinstance(v, RList) and all(s is None or isinstance(s, str) for s in v)
            and v}


def package_data(root: str) -> str:
    """The lazy-load database of an R package unpacked under root (its data/Rdata)."""
    for dirpath, _, files in os.walk(root):
        if "Rdata.rdx" in files and "Rdata.rdb" in files:
            return os.path.join(dirpath, "Rdata")
    raise RDataError(f"{root}: no R package data (data/Rdata.rdx and .rdb)")
