"""Recovering trainable weights and the vocabulary from a SenseVoice ONNX export."""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import unittest

import torch

from train.sensevoice import from_onnx as fo
from train.sensevoice import model as svm
from train.sensevoice.tokens import train_sentencepiece
from train.corpus.sentences import sentences

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "testdata", "sensevoice", "tiny")


class RecoverTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def test_tiny_weights_come_back(self):
        """The committed tiny export gives back the weights export.py built (same seed)."""
        model, vocab, cmvn, size = fo.recover(TINY)
        self.assertEqual(size, "tiny")
        torch.manual_seed(20240717)
        want = svm.build(svm.config_for("tiny", vocab_size=len(vocab))).state_dict()
        got = model.state_dict()
        for k, v in want.items():
            self.assertTrue(torch.allclose(got[k].float(), v.float(), atol=1e-5 * max(1.0, float(v.abs().max()))), k)
        self.assertEqual(len(cmvn["neg_mean"]), 560)

    def test_fp16_weights_come_back(self):
        """An export with float16 weights (the shipped demo recogniser's --fp16-weights) is
        recovered too: its Cast-read weights resolve, and the re-export stored the same way is
        the same model."""
        import onnx

        from train.sensevoice.export import store_fp16

        model, _, _, _ = fo.recover(TINY)
        shutil.copytree(TINY, os.path.join(self.dir, "fp16"))
        path = os.path.join(self.dir, "fp16", "model.onnx")
        m = onnx.load(path)
        # round every weight to float16 first, as export --fp16-weights does
        from onnx import numpy_helper

        for t in m.graph.initializer:
            a = numpy_helper.to_array(t)
            if a.dtype.kind == "f" and a.size >= 64:
                t.CopyFrom(numpy_helper.from_array(a.astype("float16").astype("float32"), t.name))
        self.assertGreater(store_fp16(m, min_elements=64), 0)
        onnx.save(m, path)
        got, _, _, size = fo.recover(os.path.join(self.dir, "fp16"))
        self.assertEqual(size, "tiny")
        for k, v in model.state_dict().items():
            self.assertTrue(torch.allclose(got.state_dict()[k].float(), v.float(), atol=2e-3 * max(1.0, float(v.abs().max()))), k)

    def test_the_shipped_recogniser_comes_back(self):
        """The embedded demo recogniser (float16 weights) is what the wizard's "improve
        recognition of my voice" starts from: it must be recoverable (it was not from session
        10's fp16 export until session 12)."""
        demo = os.path.join(ROOT, "assets", "demo", "sensevoice")
        if not os.path.exists(os.path.join(demo, "model.onnx")):
            self.skipTest("no demo recogniser in this checkout")
        model, vocab, _, size = fo.recover(demo)
        self.assertIn(size, svm.SIZES)
        self.assertEqual(len(vocab.pieces), model.cfg.vocab_size)

    def test_cli_writes_what_training_takes(self):
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(fo.main(["--model", TINY, "--out", self.dir]), 0)
        ck = torch.load(os.path.join(self.dir, "init.pt"))
        m = svm.build(svm.SenseVoiceConfig.from_dict(ck["config"]))
        svm.load_checkpoint_weights(m, os.path.join(self.dir, "init.pt"))
        self.assertTrue(os.path.isfile(os.path.join(self.dir, "cmvn.json")))

    def test_bpe_vocabulary_rebuilt_from_tokens(self):
        """tokens.txt of a SentencePiece BPE model rebuilds a model that encodes the same."""
        texts = sentences(400, 5, "mixed")
        v = train_sentencepiece(texts, os.path.join(self.dir, "bpe"), vocab_size=150)
        again = fo.vocab_from_tokens(list(v.pieces))
        self.assertIsNotNone(again.sp)
        for t in sentences(300, 9, "mixed") + ["an unseen zebra quietly juxtaposed xylophones"]:
            self.assertEqual(again.encode(t), v.encode(t), t)

    def test_bad_inputs(self):
        with self.assertRaisesRegex(fo.RecoverError, "no model.onnx"):
            fo.recover(self.dir)
        bad = os.path.join(self.dir, "model.onnx")
        with open(bad, "wb") as f:
            f.write(b"not onnx")
        with self.assertRaisesRegex(fo.RecoverError, "not an ONNX model"):
            fo.recover(self.dir)
        shutil.copy(os.path.join(TINY, "model.onnx"), bad)
        with self.assertRaisesRegex(fo.RecoverError, "tokens.txt missing"):
            fo.recover(self.dir)
        with open(os.path.join(self.dir, "tokens.txt"), "w") as f:
            f.write("<unk> 0\n")
        with self.assertRaisesRegex(fo.RecoverError, "pieces"):
            fo.recover(self.dir)


if __name__ == "__main__":
    unittest.main()
