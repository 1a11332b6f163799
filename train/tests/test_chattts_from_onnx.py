"""train.chattts.from_onnx: a trainable ChatTTS from an export (the tiny bundle): the recovered
checkpoint exports the same graphs again; exports it cannot use are refused with the reason."""
from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

from train.chattts import from_onnx
from train.chattts.export import main as export_main
from train.onnxcompare import compare_onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "testdata", "chattts", "tiny")


def run(fn, *argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = fn(list(argv))
    return rc, out.getvalue(), err.getvalue()


class FromONNXTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="parley-ctts-")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_round_trip(self):
        rc, out, err = run(from_onnx.main, "--model", TINY, "--out", self.dir)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["size"], "tiny")
        again = os.path.join(self.dir, "again")
        rc, _, err = run(export_main, "--checkpoint", os.path.join(self.dir, "init.pt"), "--out", again)
        self.assertEqual(rc, 0, err)
        for g in from_onnx.GRAPHS:
            self.assertEqual(compare_onnx(os.path.join(again, g + ".onnx"), os.path.join(TINY, g + ".onnx")), [], g)
        with open(os.path.join(again, "spk_stat.bin"), "rb") as a, open(os.path.join(TINY, "spk_stat.bin"), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_refusals(self):
        d = os.path.join(self.dir, "noenc")
        shutil.copytree(TINY, d)
        os.remove(os.path.join(d, "dvae_encoder.onnx"))
        rc, _, err = run(from_onnx.main, "--model", d, "--out", os.path.join(self.dir, "o"))
        self.assertEqual(rc, 1)
        self.assertIn("lacks dvae_encoder", err)
        with open(os.path.join(d, "config.json")) as f:
            conf = json.load(f)
        conf["format"] = "something-else"
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(conf, f)
        rc, _, err = run(from_onnx.main, "--model", d, "--out", os.path.join(self.dir, "o"))
        self.assertEqual(rc, 1)
        self.assertIn("not a Parley ChatTTS export", err)


if __name__ == "__main__":
    unittest.main()
