"""train.sensevoice.lmtune: the search over LMs and beam weights, with a stubbed transcriber."""
from __future__ import annotations

import io
import json
import os
import tempfile
import unittest
from unittest import mock

from train.sensevoice import lmtune


def bowl(best_lm: str, alpha: float, beta: float, floor: float = 0.3):
    """A WER surface with its minimum at (best_lm, alpha, beta); other LMs 0.05 worse."""
    calls = []

    def evaluate(lm, a, b):
        calls.append((lm, a, b))
        w = floor + 0.1 * (a - alpha) ** 2 + 0.01 * (b - beta) ** 2 + (0 if lm == best_lm else 0.05)
        return {"utts": 10, "wer": round(w, 6), "cer": round(w / 2, 6)}
    return evaluate, calls


class SweepTest(unittest.TestCase):
    def test_finds_the_best_lm_and_weights_each_point_once(self):
        evaluate, calls = bowl("b.bin", 0.7, 2.5)
        s = lmtune.Sweep(evaluate)
        (lm, a, b), res = s.run(["a.bin", "b.bin", "c.bin"], [0.2, 0.4, 0.6, 0.8, 1.0], [1.0, 2.0, 3.0, 4.0])
        self.assertEqual((lm, a, b), ("b.bin", 0.7, 2.5))
        self.assertAlmostEqual(res["wer"], 0.3)
        self.assertEqual(len(calls), len(set(calls)), "a point evaluated twice")
        # the coarse grid only on the first LM; the others on neighbourhoods
        self.assertGreaterEqual(sum(1 for c in calls if c[0] == "a.bin"), 20)
        self.assertLess(sum(1 for c in calls if c[0] == "c.bin"), 20)
        # the table is sorted best first and holds every point
        t = s.table()
        self.assertEqual(len(t), len(calls))
        self.assertEqual((t[0]["lm"], t[0]["alpha"], t[0]["beta"]), ("b.bin", 0.7, 2.5))
        self.assertEqual([r["wer"] for r in t], sorted(r["wer"] for r in t))

    def test_ties_go_to_cer_then_never_negative_alpha(self):
        def evaluate(lm, a, b):
            self.assertGreaterEqual(a, 0)
            return {"wer": 0.4, "cer": 0.2 if (a, b) == (0.2, 3.0) else 0.25}
        s = lmtune.Sweep(evaluate)
        (lm, a, b), _ = s.run(["x.bin"], [0.2, 0.4], [2.0, 3.0])
        self.assertEqual((a, b), (0.2, 3.0))
        self.assertIn(("x.bin", 0.1, 3.0), s.results)  # the fine step around it: half the coarse step

    def test_nothing_to_sweep(self):
        with self.assertRaises(ValueError):
            lmtune.Sweep(lambda *p: {"wer": 0, "cer": 0}).run([], [0.4], [2.0])

    def test_flags_never_send_zero(self):
        # parley reads 0 as "the default", so a zero weight goes as a tiny one
        self.assertEqual(lmtune.beam_flags(0.0, 0.0, 16),
                         ["--beam-alpha", "1e-09", "--beam-beta", "1e-09", "--beam-width", "16", "--beam-top", "8",
                          "--beam-oov", "0"])
        self.assertEqual(lmtune.beam_flags(0.55, -1.5, 32)[:4], ["--beam-alpha", "0.55", "--beam-beta", "-1.5"])
        self.assertEqual(lmtune.beam_flags(0.5, 2, 128, 16)[-6:-2], ["--beam-width", "128", "--beam-top", "16"])
        # no charge goes as parley's explicit zero (a tiny one would still ask for a word list)
        self.assertEqual(lmtune.beam_flags(0.5, 2, 128, 16, 2.5)[-2:], ["--beam-oov", "2.5"])

    def test_main_selects_on_validation_only_and_writes_lm_json(self):
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "model")
            os.makedirs(model)
            with open(os.path.join(model, "lm.bin"), "wb") as f:
                f.write(b"PARLEYLM-stub")
            for split in ("val", "test-voice"):
                with open(os.path.join(d, split + ".jsonl"), "w") as f:
                    f.write(json.dumps({"source": "x.wav", "target": "hello"}) + "\n")
            seen, tops, oovs = [], set(), set()

            def fake_evaluator(parley, model_dir, manifest, width, limit=0, top=0, oov=0.0):
                name = os.path.basename(manifest)

                def evaluate(lm, a, b):
                    seen.append((name, a, b))
                    tops.add((name, a, b, width, top))
                    oovs.add((name, width, oov))
                    # the held-out split would pick another point: it must not be asked to choose
                    target = (0.6, 3.0) if name == "val.jsonl" else (0.2, 1.0)
                    w = 0.3 + (a - target[0]) ** 2 + 0.01 * (b - target[1]) ** 2
                    return {"utts": 1, "wer": w, "cer": w / 2}
                return evaluate
            out = os.path.join(d, "out")
            with mock.patch.object(lmtune, "cli_evaluator", fake_evaluator), mock.patch("sys.stdout"), mock.patch("sys.stderr"):
                rc = lmtune.main(["--model", model, "--manifest", os.path.join(d, "val.jsonl"), "--out", out])
            self.assertEqual(rc, 0)
            with open(os.path.join(out, "lm.json")) as f:
                self.assertEqual(json.load(f), {"alpha": 0.6, "beta": 3.0, "width": 32, "top": 8})
            with open(os.path.join(out, "lm.bin"), "rb") as f:
                self.assertEqual(f.read(), b"PARLEYLM-stub")
            held = [s for s in seen if s[0] == "test-voice.jsonl"]
            self.assertEqual(sorted(held), [("test-voice.jsonl", 0.4, 2.0), ("test-voice.jsonl", 0.6, 3.0)])
            with open(os.path.join(out, "_lmtune.json")) as f:
                rep = json.load(f)["report"]["test-voice"]
            self.assertIn("chosen", rep)
            self.assertIn("defaults", rep)
            # --top: every point and the chosen report with it, the defaults without; lm.json records it
            tops.clear()
            with mock.patch.object(lmtune, "cli_evaluator", fake_evaluator), mock.patch("sys.stdout"), mock.patch("sys.stderr"):
                rc = lmtune.main(["--model", model, "--manifest", os.path.join(d, "val.jsonl"), "--out", out,
                                  "--width", "128", "--top", "16", "--fine-rounds", "0"])
            self.assertEqual(rc, 0)
            with open(os.path.join(out, "lm.json")) as f:
                self.assertEqual(json.load(f), {"alpha": 0.6, "beta": 3.0, "width": 128, "top": 16})
            self.assertEqual({(n, w, t) for n, _, _, w, t in tops},
                             {("val.jsonl", 128, 16), ("test-voice.jsonl", 128, 16), ("test-voice.jsonl", 32, 8)})
            # --oov: refused without a word list beside the LM; with one, every point and the chosen
            # report charge it, the defaults do not; lm.json records it and the list goes beside lm.bin
            args = ["--model", model, "--manifest", os.path.join(d, "val.jsonl"), "--out", out, "--oov", "2.5",
                    "--fine-rounds", "0"]
            with mock.patch.object(lmtune, "cli_evaluator", fake_evaluator), mock.patch("sys.stdout"), \
                    mock.patch("sys.stderr"), self.assertRaises(SystemExit):
                lmtune.main(args)
            with open(os.path.join(model, "lm.words.txt"), "w") as f:
                f.write("hello\n")
            oovs.clear()
            with mock.patch.object(lmtune, "cli_evaluator", fake_evaluator), mock.patch("sys.stdout"), mock.patch("sys.stderr"):
                rc = lmtune.main(args)
            self.assertEqual(rc, 0)
            with open(os.path.join(out, "lm.json")) as f:
                self.assertEqual(json.load(f), {"alpha": 0.6, "beta": 3.0, "width": 32, "top": 8, "oov": 2.5})
            with open(os.path.join(out, "lm.words.txt")) as f:
                self.assertEqual(f.read(), "hello\n")
            self.assertEqual(oovs, {("val.jsonl", 32, 2.5), ("test-voice.jsonl", 32, 2.5), ("test-voice.jsonl", 32, 0.0)})

    def test_refuses_a_beam_parley_would_refuse_before_any_work(self):
        for flags in (["--width", "0"], ["--top", "0"], ["--top", "5000"], ["--oov", "-1"], ["--oov", "nan"]):
            with self.subTest(flags=flags), mock.patch("sys.stderr"), \
                    mock.patch.object(lmtune, "build_lm", side_effect=AssertionError("built")), self.assertRaises(SystemExit):
                lmtune.main(["--model", "m", "--manifest", "val.jsonl", "--out", "o", "--build", "4:8",
                             "--checkpoint", "c"] + flags)

    def test_oov_needs_word_lists_before_any_build(self):
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "model")
            os.makedirs(model)
            err = io.StringIO()
            with mock.patch("sys.stderr", err), mock.patch.object(lmtune, "build_lm", side_effect=AssertionError("built")), \
                    self.assertRaises(SystemExit):
                lmtune.main(["--model", model, "--manifest", "val.jsonl", "--out", os.path.join(d, "o"), "--build", "4:8",
                             "--checkpoint", "c", "--oov", "2"])
            self.assertIn("needs a word list", err.getvalue())
            self.assertIn(os.path.join(model, "lm.words.txt"), err.getvalue())
            # an LM that is not there is named as such, not as a missing list
            err = io.StringIO()
            with mock.patch("sys.stderr", err), self.assertRaises(SystemExit):
                lmtune.main(["--model", model, "--manifest", "val.jsonl", "--out", os.path.join(d, "o"),
                             "--lm", os.path.join(d, "nope.bin"), "--oov", "2"])
            self.assertIn("no LM file " + os.path.join(d, "nope.bin"), err.getvalue())
            # with the model's list, each built LM gets a copy beside it
            with open(os.path.join(model, "lm.words.txt"), "w") as f:
                f.write("hello\n")

            def fake_build(checkpoint, order, mc, path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(b"PARLEYLM-stub")
            with mock.patch("sys.stderr"), mock.patch("sys.stdout"), mock.patch.object(lmtune, "build_lm", fake_build), \
                    mock.patch.object(lmtune, "cli_evaluator", lambda *a, **k: (lambda lm, x, y: {"wer": 0.5, "cer": 0.2})):
                lmtune.main(["--model", model, "--manifest", "val.jsonl", "--out", os.path.join(d, "o"), "--build", "4:8",
                             "--checkpoint", "c", "--oov", "2", "--alphas", "0.5", "--betas", "2", "--fine-rounds", "0",
                             "--report", "none"])
            with open(os.path.join(d, "o", "lms", "o4m8.words.txt")) as f:
                self.assertEqual(f.read(), "hello\n")
            with open(os.path.join(d, "o", "lm.words.txt")) as f:
                self.assertEqual(f.read(), "hello\n")

    def test_refuses_a_test_split_as_the_selector(self):
        with mock.patch("sys.stderr"), self.assertRaises(SystemExit):
            lmtune.main(["--model", "m", "--manifest", "train/out/human/test-voice.jsonl", "--out", "o"])


if __name__ == "__main__":
    unittest.main()


class LMExtraTextTest(unittest.TestCase):
    def test_bad_extra_sources_are_refused_before_any_work(self):
        import contextlib
        import io

        from train.sensevoice import lm

        for spec in ["novels", "emails:0", "emails:x", "emails:-2"]:
            err = io.StringIO()
            with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as cm:
                lm.main(["--checkpoint", "/nonexistent", "--out", "/nonexistent/lm.bin", "--extra", spec])
            self.assertEqual(cm.exception.code, 2, spec)
            self.assertIn(f"--extra {spec}", err.getvalue())


class NewTextTest(unittest.TestCase):
    def test_fortune_sentences(self):
        import shutil

        from train.corpus import text as T
        from train.sensevoice import newtext

        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        with open(os.path.join(root, "wisdom"), "w") as f:
            f.write("A penny saved is a penny earned. Too short.\n%\n"
                    "Roses are red,\n\tviolets are blue, and this verse is left out.\n%\n"
                    "He who laughs last thinks slowest of all the people here.\n%\n"
                    "A penny saved is a penny earned.\n%\n"
                    "One two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                    "fifteen sixteen seventeen.\n")
        with open(os.path.join(root, "wisdom.dat"), "wb") as f:
            f.write(b"\x00\x01 not text")
        os.mkdir(os.path.join(root, "off"))
        with open(os.path.join(root, "off", "rude"), "w") as f:
            f.write("This offensive sentence must never be read aloud.\n")
        got = newtext.sentences(root)
        self.assertEqual(sorted(got), ["a penny saved is a penny earned",
                                       "he who laughs last thinks slowest of all the people here"])
        self.assertEqual(got, newtext.sentences(root))  # a fixed order
        with self.assertRaisesRegex(T.TextSourceMissing, "fortunes"):
            newtext.sentences(os.path.join(root, "off", "none"))


class JoinTest(unittest.TestCase):
    def test_long_recordings_from_utterances(self):
        import shutil

        import numpy as np
        import soundfile as sf

        from train.sensevoice import evaluate_cli

        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        rows, files = [], []
        for i in range(5):
            p = os.path.join(root, f"{i}.wav")
            sf.write(p, np.full((1600 * (i + 1), 2), 0.1 * (i + 1), np.float32), 16000)  # stereo is averaged
            rows.append({"target": f"word{i}", "speaker": "s"})
            files.append(p)
        jrows, jfiles = evaluate_cli.join(rows, files, 2, 0.25, root)
        self.assertEqual([r["target"] for r in jrows], ["word0 word1", "word2 word3"])  # the fifth left out
        x, sr = sf.read(jfiles[1], dtype="float32")
        self.assertEqual((sr, len(x)), (16000, 1600 * 3 + 4000 + 1600 * 4))
        np.testing.assert_allclose(x[:4800], 0.3, atol=1e-4)  # the sources are 16-bit
        np.testing.assert_array_equal(x[4800:8800], 0)
        np.testing.assert_allclose(x[8800:], 0.4, atol=1e-4)
        sf.write(os.path.join(root, "8k.wav"), np.zeros(800, np.float32), 8000)
        with self.assertRaisesRegex(ValueError, "8000 Hz"):
            evaluate_cli.join(rows[:2], [files[0], os.path.join(root, "8k.wav")], 2, 0, root)

    def test_each_utterance_written_as_scored(self):
        import shutil

        from train.judge import score
        from train.sensevoice import evaluate_cli

        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        pairs = [("turn the light on", "Turn the lights on."), ("", "stop"), ("a b c", "a b c")]
        rows = [{"source": "x/0.wav"}, {"source": "x/1.wav", "joined": 2}, {"source": "x/3.wav"}]
        out = os.path.join(root, "hyps.jsonl")
        evaluate_cli.write_hyps(out, rows, pairs)
        with open(out) as f:
            got = [json.loads(line) for line in f]
        self.assertEqual([(g["source"], g["hyp"], g["target"]) for g in got],
                         [(r["source"], h, ref) for r, (h, ref) in zip(rows, pairs)])
        self.assertEqual([g.get("joined") for g in got], [None, 2, None])
        self.assertEqual([(g["errors"], g["words"]) for g in got], [(1, 4), (1, 1), (0, 3)])
        self.assertAlmostEqual(sum(g["errors"] for g in got) / sum(g["words"] for g in got), score(pairs)["wer"])
        self.assertEqual(os.listdir(root), ["hyps.jsonl"])  # no temporary left behind
        with self.assertRaises(OSError):  # a folder that is not there: the caller reports it
            evaluate_cli.write_hyps(os.path.join(root, "none", "h.jsonl"), rows, pairs)
        with mock.patch("json.dumps", side_effect=[json.dumps({}), OSError(28, "No space left on device")]), \
                self.assertRaises(OSError):  # the disk fills on the second line: no half file, no temporary
            evaluate_cli.write_hyps(os.path.join(root, "full.jsonl"), rows, pairs)
        self.assertEqual(os.listdir(root), ["hyps.jsonl"])
        with mock.patch("sys.stderr"), self.assertRaises(SystemExit):  # refused before any decoding
            with mock.patch.object(evaluate_cli, "transcribe", side_effect=AssertionError("decoded")):
                evaluate_cli.main(["--model", "m", "--manifest", "val.jsonl", "--hyps", os.path.join(root, "none", "h.jsonl")])

    def test_clipped_recordings(self):
        import shutil

        import numpy as np
        import soundfile as sf

        from train.sensevoice import evaluate_cli

        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        p = os.path.join(root, "s.wav")
        x = 0.05 * np.sin(np.arange(16000) / 5) * np.linspace(0.2, 1, 16000)  # a swell: the loud end clips
        sf.write(p, np.stack([x, x], 1).astype(np.float32), 16000)
        out = os.path.join(root, "out")
        os.mkdir(out)
        (got,) = evaluate_cli.clipped([p], 0.02, out)
        y, sr = sf.read(got, dtype="float32")
        self.assertEqual((sr, len(y)), (16000, 16000))
        self.assertEqual(sf.info(got).subtype, "PCM_16")
        full = np.abs(y) >= 32767 / 32768
        self.assertAlmostEqual(float(full.mean()), 0.02, delta=0.005)
        self.assertGreater(full[8000:].sum(), 10 * max(1, full[:8000].sum()))  # where it was loudest
