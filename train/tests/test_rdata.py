"""train.corpus.rdata (R's lazy-load data read without R) and the LM-only text it brings:
Jane Austen's novels from Debian's r-cran-janeaustenr (train.corpus.text, source "austen").
No network: packages are written here in R's own format."""
from __future__ import annotations

import gzip
import os
import random
import shutil
import struct
import subprocess
import tempfile
import time
import unittest
import zlib
from unittest import mock

from train.corpus import rdata as R
from train.corpus import text as T

# The index (Rdata.rdx, decompressed) of Debian's r-cran-janeaustenr 1.0.0-1, as R 4 wrote it:
# six variables, each c(offset, length) into Rdata.rdb, then references and compressed.
REAL_INDEX = bytes.fromhex(
    "580a000000030004020100030500000000055554462d38000002130000000300000213000000060000000d0000000200"
    "00000000055f2b0000000d0000000200055f2b00055c8d0000000d00000002000abbb80002ac5c0000000d0000000200"
    "0d68140002d32a0000000d0000000200103b3e000422bd0000000d0000000200145dfb0004113c000004020000000100"
    "040009000000056e616d657300000010000000060004000900000004656d6d61000400090000000d6d616e736669656c"
    "647061726b000400090000000f6e6f727468616e6765726162626579000400090000000a70657273756173696f6e0004"
    "00090000000e70726964657072656a7564696365000400090000001073656e736573656e736962696c697479000000fe"
    "000002130000000000000402000001ff0000001000000000000000fe0000000a000000010000000100000402000001ff"
    "000000100000000300040009000000097661726961626c6573000400090000000a7265666572656e6365730004000900"
    "00000a636f6d70726573736564000000fe")


class _Writer:
    """R's XDR serialization (format 3) of str (CHARSXP in a STRSXP), None (NA), lists of str,
    lists of int (INTSXP) and dicts (a VECSXP with names); repeated symbols as references."""

    def __init__(self):
        self.out, self.syms = bytearray(b"X\n"), {}
        self.int(3), self.int(0x40200), self.int(0x30500), self.int(5)
        self.out += b"UTF-8"

    def int(self, v):
        self.out += struct.pack(">i", v)

    def chars(self, s, latin1=False):
        if s is None:
            self.int(9), self.int(-1)
            return
        b = s.encode("latin-1" if latin1 else "utf-8")
        self.int(9 | ((1 << 14) if latin1 else (1 << 15))), self.int(len(b))
        self.out += b

    def sym(self, name):
        if name in self.syms:
            self.int(255 | (self.syms[name] << 8))
            return
        self.int(1), self.chars(name)
        self.syms[name] = len(self.syms) + 1

    def item(self, v):
        if isinstance(v, dict):
            self.int(19 | (1 << 9)), self.int(len(v))
            for x in v.values():
                self.item(x)
            self.int(2 | (1 << 10)), self.sym("names"), self.item(list(v)), self.int(254)
        elif isinstance(v, list) and v and all(isinstance(x, int) for x in v):
            self.int(13), self.int(len(v))
            for x in v:
                self.int(x)
        elif isinstance(v, list):
            self.int(16), self.int(len(v))
            for s in v:
                self.chars(s)
        else:
            raise TypeError(v)
        return self


def serialize(v) -> bytes:
    return bytes(_Writer().item(v).out)


def plain(v):
    """What the reader gives for a value the writer wrote: a dict's values, in order."""
    return [plain(x) for x in v.values()] if isinstance(v, dict) else v


def write_lazyload(path: str, variables: dict) -> None:
    blobs, where = bytearray(), {}
    for name, v in variables.items():
        data = serialize(v)
        blob = struct.pack(">I", len(data)) + zlib.compress(data)
        where[name] = [len(blobs), len(blob)]
        blobs += blob
    with open(path + ".rdb", "wb") as f:
        f.write(blobs)
    with open(path + ".rdx", "wb") as f:
        f.write(gzip.compress(serialize({"variables": where, "references": {}, "compressed": [1]})))


def austen_package(root: str, books: dict) -> str:
    """An unpacked r-cran-janeaustenr under a text cache, as fetch_deb leaves it."""
    pkg = os.path.join(root, "deb-r-cran-janeaustenr")
    data = os.path.join(pkg, "usr", "lib", "R", "site-library", "janeaustenr", "data")
    os.makedirs(data)
    write_lazyload(os.path.join(data, "Rdata"), books)
    open(os.path.join(pkg, ".complete"), "w").close()
    return pkg


class RDataTest(unittest.TestCase):
    def test_reads_what_r_wrote(self):
        index = R.unserialize(REAL_INDEX)
        self.assertEqual(index.names, ["variables", "references", "compressed"])
        v = index[0]
        self.assertEqual(v.names, ["emma", "mansfieldpark", "northangerabbey", "persuasion",
                                   "prideprejudice", "sensesensibility"])
        self.assertEqual(v[0], [0, 352043])
        # the variables lie end to end in Rdata.rdb
        for (a, n), (b, _) in zip(v, v[1:]):
            self.assertEqual(a + n, b)

    def test_round_trip(self):
        for value in (["a line", None, "caf\u00e9 \u2014 ok", ""], {"x": ["one"], "y": [3, -1]},
                      {"outer": {"inner": ["deep"]}, "names": ["a"]}):
            self.assertEqual(R.unserialize(serialize(value)), plain(value))
        got = R.unserialize(serialize({"p": ["q"], "r": {"s": ["t"]}}))
        self.assertEqual(got.names, ["p", "r"])
        self.assertEqual(got[1].names, ["s"])  # the second "names" symbol is a reference

    def test_latin1_strings(self):
        w = _Writer()
        w.int(16), w.int(2), w.chars("na\u00efve", latin1=True), w.chars("plain")
        self.assertEqual(R.unserialize(bytes(w.out)), ["na\u00efve", "plain"])

    def test_lazyload_and_strings(self):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        path = os.path.join(root, "Rdata")
        write_lazyload(path, {"book": ["It was a fine day.", "", "The end."], "counts": [1, 2], "empty": []})
        got = R.lazyload(path)
        self.assertEqual(sorted(got), ["book", "counts", "empty"])
        self.assertEqual(R.strings(path), {"book": ["It was a fine day.", "", "The end."]})
        self.assertEqual(R.package_data(root), path)

    def test_bad_databases_name_the_file(self):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        path = os.path.join(root, "Rdata")
        with self.assertRaisesRegex(R.RDataError, "Rdata"):
            R.lazyload(path)  # no files
        with self.assertRaisesRegex(R.RDataError, "no R package data"):
            R.package_data(root)
        write_lazyload(path, {"book": ["words"]})
        with open(path + ".rdb", "rb") as f:
            good = f.read()
        for bad, why in ((good[:-3], "outside"), (good[:4] + b"\x00" * (len(good) - 4), "Rdata.rdb"),
                         (struct.pack(">I", 999) + good[4:], "header says 999")):
            with open(path + ".rdb", "wb") as f:
                f.write(bad)
            with self.assertRaisesRegex(R.RDataError, why):
                R.lazyload(path)
        with open(path + ".rdx", "wb") as f:
            f.write(b"\x1f\x8b not gzip")
        with self.assertRaisesRegex(R.RDataError, "Rdata.rdx"):
            R.lazyload(path)
        with open(path + ".rdx", "wb") as f:
            f.write(gzip.compress(serialize(["not", "an", "index"])))
        with self.assertRaisesRegex(R.RDataError, "no variables"):
            R.lazyload(path)

    def test_refuses_what_is_not_data(self):
        for data, why in ((b"A\n", "header"), (b"X\n" + struct.pack(">iii", 7, 0, 0), "format 7"),
                          (serialize(["x"])[:-1], "truncated"),
                          (serialize(["x"])[:23] + struct.pack(">i", 21) + b"\x00" * 8, "type 21"),
                          (serialize(["x"])[:23] + struct.pack(">ii", 16, 1 << 30), "does not fit"),
                          (serialize(["x"])[:23] + struct.pack(">i", 255 | (9 << 8)), "reference 9")):
            with self.assertRaisesRegex(R.RDataError, why):
                R.unserialize(data)
        deep = serialize(["x"])[:23] + struct.pack(">ii", 19, 1) * 500 + struct.pack(">ii", 16, 0)
        with self.assertRaisesRegex(R.RDataError, "nested deeper"):
            R.unserialize(deep)

    def test_names_that_are_not_strings_are_dropped(self):
        # a list whose "names" attribute is raw bytes, a bare string or the wrong length
        head = serialize(["x"])[:23]
        names_attr = lambda value: (struct.pack(">ii", 0x402, 1) + struct.pack(">ii", 0x40009, 5) + b"names"
                                    + value + struct.pack(">i", 254))
        for value in (struct.pack(">ii", 24, 1) + b"\0", struct.pack(">ii", 0x40009, 6) + b"xnames",
                      struct.pack(">iii", 16, 2, 9) + struct.pack(">i", 1) + b"a" + struct.pack(">ii", 9, 1) + b"b"):
            # a list whose attributes are (wrongly) a list carrying those names
            got = R.unserialize(head + struct.pack(">ii", 0x213, 0) + struct.pack(">ii", 0x213, 0) + names_attr(value))
            self.assertEqual(got, [])
            self.assertIsNone(got.names)
            inner = R.unserialize(head + struct.pack(">ii", 0x213, 0) + names_attr(value))
            self.assertIsNone(inner.names)

    def test_charsxp_attributes_closures_and_altrep(self):
        head = serialize(["x"])[:23]
        # an old CHARSXP with attributes: read and ignored, as R does
        w = struct.pack(">ii", 16, 1) + struct.pack(">ii", 9 | (1 << 9), 2) + b"ok" + struct.pack(">i", 254)
        self.assertEqual(R.unserialize(head + w), ["ok"])
        with self.assertRaisesRegex(R.RDataError, "type 3"):  # a closure
            R.unserialize(head + struct.pack(">i", 3) + struct.pack(">i", 254) * 3)
        # compact_intseq 1:4, as R 3.5+ writes 1:4
        info = (struct.pack(">i", 2) + struct.pack(">ii", 1, 0x40009) + struct.pack(">i", 14) + b"compact_intseq"
                + struct.pack(">i", 2) + struct.pack(">ii", 1, 0x40009) + struct.pack(">i", 4) + b"base"
                + struct.pack(">i", 2) + struct.pack(">iii", 13, 1, 13) + struct.pack(">i", 254))
        seq = struct.pack(">ii", 14, 3) + struct.pack(">ddd", 4, 1, 1)
        self.assertEqual(R.unserialize(head + struct.pack(">i", 238) + info + seq + struct.pack(">i", 254)), [1, 2, 3, 4])
        other = info.replace(b"compact_intseq", b"deferred_strin")
        with self.assertRaisesRegex(R.RDataError, "deferred_strin"):
            R.unserialize(head + struct.pack(">i", 238) + other + seq + struct.pack(">i", 254))
        huge = struct.pack(">ii", 14, 3) + struct.pack(">ddd", 1e12, 1, 1)
        with self.assertRaisesRegex(R.RDataError, "elements"):
            R.unserialize(head + struct.pack(">i", 238) + info + huge + struct.pack(">i", 254))

    def test_a_corrupt_variable_is_named(self):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        path = os.path.join(root, "Rdata")
        write_lazyload(path, {"book": ["words"]})
        data = serialize(["words"])[:-3]  # valid zlib around truncated R data
        blob = struct.pack(">I", len(data)) + zlib.compress(data)
        with open(path + ".rdb", "wb") as f:
            f.write(blob)
        with open(path + ".rdx", "wb") as f:
            f.write(gzip.compress(serialize({"variables": {"book": [0, len(blob)]}, "references": {}, "compressed": [1]})))
        with self.assertRaisesRegex(R.RDataError, "Rdata.rdb: book.*truncated"):
            R.lazyload(path)

    def test_fuzz_never_raises_anything_else(self):
        rng = random.Random(11)
        seeds = [REAL_INDEX, serialize({"a": ["one", None, "two"], "b": [1, 2, 3], "c": {"d": ["e"]}})]
        start = time.monotonic()
        for i in range(3000):
            b = bytearray(rng.choice(seeds))
            for _ in range(rng.randrange(1, 6)):
                op = rng.randrange(3)
                k = rng.randrange(len(b))
                if op == 0:
                    b[k] = rng.randrange(256)
                elif op == 1:
                    del b[k:k + rng.randrange(1, 9)]
                else:
                    b[k:k] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
                if not b:
                    break
            try:
                R.unserialize(bytes(b))
            except R.RDataError:
                pass
        self.assertLess(time.monotonic() - start, 60)


class AustenTextTest(unittest.TestCase):
    BOOK = ["PRIDE AND PREJUDICE", "", "By Jane Austen", "", "", "Chapter 1", "",
            "It is a truth universally acknowledged, that a single man in possession",
            "of a good fortune, must be in want of a wife.", "",
            "\"My dear Mr. Bennet,\" said his lady to him one day, \"have you heard that",
            "Netherfield Park is let at last?\"", "", "CHAPTER II.", "", "Mr. Bennet replied that he had not."]

    def test_paragraphs_without_headings(self):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        pkg = austen_package(root, {"prideprejudice": self.BOOK, "counts": [1]})
        self.assertEqual(list(T.austen_paragraphs(pkg)), [
            "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
            "must be in want of a wife.",
            "\"My dear Mr. Bennet,\" said his lady to him one day, \"have you heard that Netherfield Park is let at last?\"",
            "Mr. Bennet replied that he had not."])
        got = T.lm_sentences("austen", cache=root)
        said = ["it is a truth universally acknowledged that a single man in possession of a good fortune must be in want of a wife",
                "my dear mister bennet said his lady to him one day have you heard that netherfield park is let at last",
                "mister bennet replied that he had not"]
        self.assertEqual(got, [s for s in said if T.text_set(s) == "train"])
        self.assertTrue(got)
        self.assertTrue(all(T.text_set(s) == "train" for s in got))

    def test_package_without_novels(self):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        pkg = austen_package(root, {"counts": [1, 2]})
        with self.assertRaisesRegex(T.TextSourceMissing, "no novels"):
            list(T.austen_paragraphs(pkg))
        os.remove(os.path.join(R.package_data(pkg) + ".rdb"))
        with self.assertRaisesRegex(T.TextSourceMissing, "no R package data"):
            list(T.austen_paragraphs(pkg))

    def test_fetch_deb_names_the_package(self):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        refused = subprocess.CompletedProcess([], 100, "", "E: Unable to locate package r-cran-janeaustenr")
        with mock.patch.object(T.subprocess, "run", return_value=refused):
            with self.assertRaisesRegex(T.TextSourceMissing, "r-cran-janeaustenr=1.0.0-1.*Unable to locate"):
                T.lm_sentences("austen", cache=root)
        self.assertFalse(os.path.exists(os.path.join(root, "deb-r-cran-janeaustenr", ".complete")))


if __name__ == "__main__":
    unittest.main()
