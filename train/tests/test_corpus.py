"""Synthetic corpus generator (needs espeak-ng)."""
from __future__ import annotations

import io
import os
import shutil
import tempfile
import unittest

import soundfile as sf

from train.corpus import synth
from train.corpus.sentences import number_words, sentences
from train.data import read_manifest


class SentencesTest(unittest.TestCase):
    def test_number_words(self):
        for n, want in [(0, "zero"), (13, "thirteen"), (40, "forty"), (71, "seventy one"),
                        (100, "one hundred"), (105, "one hundred and five"), (2000, "two thousand"),
                        (1005, "one thousand and five"), (9999, "nine thousand nine hundred and ninety nine")]:
            self.assertEqual(number_words(n), want)

    def test_deterministic(self):
        self.assertEqual(sentences(20, 3), sentences(20, 3))
        self.assertNotEqual(sentences(20, 3), sentences(20, 4))

    def test_styles(self):
        from train.corpus.sentences import STYLES, vocabulary
        vocab = set(vocabulary())
        for style in STYLES:
            got = sentences(300, 3, style)
            self.assertEqual(got, sentences(300, 3, style))
            self.assertTrue(all(s and s == s.lower() for s in got), style)
        # the templates stay what the first three demo phases trained on
        self.assertEqual(sentences(50, 1), sentences(50, 1, "templates"))
        # word salad: words the static sentences and lists say, in orders they never do
        from train.corpus.sentences import all_static
        mixed = sentences(300, 3, "mixed")
        salad = [s for s in mixed if set(s.split()) <= vocab and s not in all_static()]
        self.assertGreater(len(salad), 60)
        self.assertEqual(len(salad), len(set(salad)))
        replies = [s for s in sentences(300, 3, "assistant") if s.startswith(("it's ", "timer set", "alarm set"))]
        self.assertGreater(len(replies), 20)
        with self.assertRaises(ValueError):
            sentences(1, 1, "poetry")

    def test_spoken_form(self):
        self.assertEqual(synth.spoken_form("it's eight a m, then a map at two p m"), "it's eight AM, then a map at two PM")

    def test_test_voices_never_in_training(self):
        self.assertFalse(set(synth.TRAIN_VARIANTS) & set(synth.TEST_VARIANTS))


@unittest.skipIf(shutil.which("espeak-ng") is None, "espeak-ng not installed")
class SynthTest(unittest.TestCase):
    def test_generate_small_corpus(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        counts = synth.generate(d, 4, 1, 2, seed=5, aug=1.0, jobs=1, log=io.StringIO())
        self.assertEqual(counts, {"train": 4, "val": 1, "test": 2})
        train = read_manifest(os.path.join(d, "train.jsonl"), check_audio=True)
        test = read_manifest(os.path.join(d, "test.jsonl"), check_audio=True)
        for r in train + test:
            info = sf.info(r["source"])
            self.assertEqual((info.samplerate, info.channels), (16000, 1))
            self.assertAlmostEqual(r["source_len"], info.frames / 160, delta=1)
            self.assertEqual(r["target"], r["target"].lower())
        variants = lambda rs: {r["voice"].split("+")[1] if "+" in r["voice"] else "" for r in rs}
        self.assertFalse(variants(train) & variants(test))
        self.assertTrue(all(r["augmented"] for r in train))
        self.assertFalse(any(r["augmented"] for r in test))

    def test_end_to_end_prepare_train_export(self):
        """corpus -> prepare (CMVN, BPE) -> train (2 data parts) -> export -> evaluate."""
        import contextlib
        import json

        from train.sensevoice import evaluate, export, prepare
        from train.sensevoice import train as svtrain

        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        synth.generate(d, 6, 2, 2, seed=6, aug=0.5, jobs=1, log=io.StringIO())
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            prepare.main(["--manifest", os.path.join(d, "train.jsonl"), "--out", d, "--bpe", "60"])
            svtrain.main(["--train", os.path.join(d, "train.jsonl"), "--val", os.path.join(d, "val.jsonl"),
                          "--vocab", os.path.join(d, "bpe.model"), "--cmvn", os.path.join(d, "cmvn.json"),
                          "--size", "tiny", "--out", os.path.join(d, "run"), "--epochs", "2",
                          "--data-split-num", "2", "--batch-size", "1000", "--log-interval", "1"])
        events = [json.loads(l) for l in out.getvalue().splitlines() if l.startswith("{")]
        kinds = [e.get("event") for e in events]
        for k in ("start", "train", "val", "checkpoint", "done"):
            self.assertIn(k, kinds)
        tr = [e for e in events if e.get("event") == "train"][0]
        for k in ("step", "epoch", "loss", "lr", "tokens_per_s", "samples_per_s", "mem_mb", "eta_s"):
            self.assertIn(k, tr)
        done = events[-1]
        self.assertEqual(done["event"], "done")
        self.assertEqual(done["epoch"], 2)
        with contextlib.redirect_stdout(io.StringIO()):
            export.main(["--checkpoint", done["checkpoint"], "--out", os.path.join(d, "onnx")])
        with open(os.path.join(d, "onnx", "tokens.txt")) as f:
            self.assertEqual(len(f.readlines()), 60)
        model, vocab, nm, istd = export.load_our_checkpoint(done["checkpoint"])
        res = evaluate.evaluate(model, vocab, nm, istd, read_manifest(os.path.join(d, "test.jsonl")))
        self.assertEqual(res["utts"], 2)


if __name__ == "__main__":
    unittest.main()
