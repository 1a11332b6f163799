"""train.sensevoice.base: the fine-tuning starting point from an installed recogniser."""
from __future__ import annotations

import io
import os
import shutil
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

import onnx
import torch

from train.sensevoice import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "testdata", "sensevoice", "tiny")


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = base.main(list(argv))
    return rc, out.getvalue(), err.getvalue()


class BaseTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="parley-base-")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_onnx_export_gives_trainable_checkpoint(self):
        rc, out, err = run("--onnx", TINY, "--out", self.dir)
        self.assertEqual(rc, 0, err)
        ck = torch.load(os.path.join(self.dir, "init.pt"), map_location="cpu")
        for k in ("model", "config", "tokens", "cmvn"):
            self.assertIn(k, ck)
        self.assertIn('"size": "tiny"', out)

    def test_foreign_export_says_use_official(self):
        d = os.path.join(self.dir, "foreign")
        os.makedirs(d)
        m = onnx.load(os.path.join(TINY, "model.onnx"))
        for p in m.metadata_props:
            if p.key == "comment":
                p.value = "converted by someone else"
        onnx.save(m, os.path.join(d, "model.onnx"))
        shutil.copy(os.path.join(TINY, "tokens.txt"), d)
        rc, _, err = run("--onnx", d, "--out", os.path.join(self.dir, "out"))
        self.assertEqual(rc, 1)
        self.assertIn("not made by Parley", err)
        self.assertIn("--official", err)

    def test_export_disk_full(self):
        """A full disk while exporting (here a file size limit) is one line, not a traceback."""
        import resource
        import subprocess
        import sys

        rc, _, err = run("--onnx", TINY, "--out", self.dir)
        self.assertEqual(rc, 0, err)
        out = os.path.join(self.dir, "model")
        p = subprocess.run([sys.executable, "-m", "train.sensevoice.export", "--checkpoint", os.path.join(self.dir, "init.pt"),
                            "--out", out], cwd=ROOT, capture_output=True, text=True,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (32 << 10, 32 << 10)))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("error: cannot write the export to", p.stderr)
        self.assertNotIn("Traceback", p.stderr)

    def test_official_dir_lacking_files(self):
        rc, _, err = run("--official", self.dir, "--out", os.path.join(self.dir, "out"))
        self.assertEqual(rc, 1)
        self.assertIn("model.pt", err)
        self.assertIn("am.mvn", err)
        self.assertIn("*.bpe.model", err)


if __name__ == "__main__":
    unittest.main()
