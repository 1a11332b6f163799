"""SenseVoice model, export, dataset and error handling."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np
import soundfile as sf
import torch

from train.sensevoice import export as svx
from train.sensevoice import model as svm
from train.sensevoice.dataset import (CLIP_SHARE, AudioError, SenseVoiceDataset, collate, greedy_decode, load_audio,
                                      overdrive)
from train.sensevoice.features import apply_cmvn, features, lfr
from train.data import sample_rng
from train.sensevoice.tokens import SPECIAL_TOKENS, char_vocab, read_tokens
from train.onnxcompare import compare_arrays, compare_onnx, compare_reference
from train.trainer import CheckpointError, load_checkpoint

TINY = dict(vocab_size=len(char_vocab()))


class ModelTest(unittest.TestCase):
    def test_state_dict_names_match_official_layout(self):
        cfg = svm.config_for("small", d_model=8, heads=2, ffn=8, vocab_size=11)
        names = set(svm.build(cfg).state_dict())
        for want in ["embed.weight", "encoder.encoders0.0.self_attn.linear_q_k_v.weight",
                     "encoder.encoders0.0.self_attn.fsmn_block.weight", "encoder.encoders0.0.norm1.weight",
                     "encoder.encoders.48.feed_forward.w_2.bias", "encoder.tp_encoders.19.self_attn.linear_out.weight",
                     "encoder.after_norm.weight", "encoder.tp_norm.bias", "ctc.ctc_lo.weight", "ctc.ctc_lo.bias"]:
            self.assertIn(want, names)
        self.assertNotIn("encoder.encoders.49.norm1.weight", names)
        self.assertNotIn("encoder.tp_encoders.20.norm1.weight", names)
        sd = svm.build(cfg).state_dict()
        self.assertEqual(tuple(sd["embed.weight"].shape), (16, 560))
        self.assertEqual(tuple(sd["encoder.encoders0.0.self_attn.linear_q_k_v.weight"].shape), (24, 560))
        self.assertEqual(tuple(sd["encoder.encoders0.0.self_attn.fsmn_block.weight"].shape), (8, 1, 11))

    def test_small_parameter_count(self):
        # count analytically from a narrow build: every block's size is linear in what we vary
        c = svm.SIZES["small"]
        d, f, k, v, n, tp = c["d_model"], c["ffn"], c["kernel_size"], c["vocab_size"], c["num_blocks"], c["tp_blocks"]
        block = lambda i: i * 3 * d + 3 * d + d * d + d + d * k + 2 * d * f + f + d + 2 * i + 2 * d
        total = block(560) + (n - 1 + tp) * block(d) + 4 * d + d * v + v + 16 * 560
        self.assertTrue(233e6 < total < 235e6, total)
        narrow = svm.config_for("small", d_model=8, heads=2, ffn=16, kernel_size=3, vocab_size=7)
        d, f, k, v = 8, 16, 3, 7
        self.assertEqual(svm.count_params(svm.build(narrow)),
                         block(560) + (n - 1 + tp) * block(d) + 4 * d + d * v + v + 16 * 560)

    def test_logits_shape_and_padding_invariance(self):
        torch.manual_seed(0)
        m = svm.build(svm.config_for("tiny", **TINY)).eval()
        a, b = torch.randn(1, 9, 560), torch.randn(1, 5, 560)
        x = torch.zeros(2, 9, 560)
        x[0], x[1, :5] = a[0], b[0]
        with torch.no_grad():
            batched = m(x, torch.tensor([9, 5], dtype=torch.int32), torch.tensor([0, 4], dtype=torch.int32),
                        torch.tensor([15, 14], dtype=torch.int32))
            one = m(b, torch.tensor([5], dtype=torch.int32), torch.tensor([4], dtype=torch.int32),
                    torch.tensor([14], dtype=torch.int32))
        self.assertEqual(tuple(batched.shape), (2, 13, len(char_vocab())))
        self.assertLess(float((batched[1, :9] - one[0]).abs().max()), 1e-5)

    def test_ctc_loss_trains(self):
        torch.manual_seed(0)
        v = char_vocab()
        m = svm.build(svm.config_for("tiny", vocab_size=len(v), dropout=0.0, attention_dropout=0.0))
        opt = torch.optim.Adam(m.parameters(), 5e-3)
        x = torch.randn(2, 20, 560)
        y = torch.tensor([v.encode("hi yo"), v.encode("ok ok")])
        rich = torch.tensor([[v.id("<|en|>"), v.id("<|NEUTRAL|>"), v.id("<|Speech|>"), v.id("<|woitn|>")]] * 2)
        args = (x, torch.tensor([20, 20]), torch.tensor([4, 4]), torch.tensor([15, 15]))
        first = None
        for _ in range(100):
            loss, _ = m(*args, y=y, y_length=torch.tensor([6, 6]), rich=rich)
            first = first if first is not None else float(loss)
            opt.zero_grad()
            loss.backward()
            opt.step()
        self.assertLess(float(loss), first / 3)
        m.eval()
        hyp = greedy_decode(m(*args).detach(), torch.tensor([24, 24]))
        self.assertEqual(hyp[0][:4], rich[0].tolist())
        self.assertEqual(v.decode(hyp[0]), "hi yo")

    def test_load_official_style_checkpoint(self):
        cfg = svm.config_for("tiny", **TINY)
        src = svm.build(cfg)
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        p = os.path.join(d, "model.pt")
        torch.save({"state_dict": {"module." + k: v for k, v in src.state_dict().items()}}, p)
        dst = svm.build(cfg)
        svm.load_checkpoint_weights(dst, p)
        for k, v in src.state_dict().items():
            self.assertTrue(torch.equal(v, dst.state_dict()[k]), k)
        torch.save({"encoder.bogus": torch.zeros(1)}, p)
        with self.assertRaisesRegex(RuntimeError, "state dict mismatch"):
            svm.load_checkpoint_weights(dst, p)

    def test_lfr_matches_funasr_rule(self):
        x = torch.arange(13, dtype=torch.float32)[:, None]
        out = lfr(x)
        self.assertEqual(out[:, :].tolist(), [[0, 0, 0, 0, 1, 2, 3], [3, 4, 5, 6, 7, 8, 9], [9, 10, 11, 12, 12, 12, 12]])
        for t, n in [(1, 1), (5, 1), (6, 1), (7, 2), (12, 2), (13, 3), (20, 4)]:
            self.assertEqual(lfr(torch.zeros(t, 80)).shape[0], n, t)


class ExportTest(unittest.TestCase):
    def test_export_bundle(self):
        import onnx

        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        torch.manual_seed(1)
        m = svm.build(svm.config_for("tiny", **TINY))
        nm, istd = svx.synthetic_cmvn(1)
        paths = svx.save_bundle(m, char_vocab(), nm, istd, d, comment="test", int8=True, reference=True, seed=1)
        mo = onnx.load(paths["model"])
        meta = {p.key: p.value for p in mo.metadata_props}
        want = {"model_type": "sense_voice_ctc", "vocab_size": str(len(char_vocab())), "lfr_window_size": "7",
                "lfr_window_shift": "6", "normalize_samples": "0", "lang_auto": "0", "lang_zh": "3", "lang_en": "4",
                "lang_yue": "7", "lang_ja": "11", "lang_ko": "12", "lang_nospeech": "13", "with_itn": "14",
                "without_itn": "15"}
        for k, v in want.items():
            self.assertEqual(meta.get(k), v, k)
        self.assertEqual(len(meta["neg_mean"].split(",")), 560)
        self.assertEqual(len(meta["inv_stddev"].split(",")), 560)
        self.assertEqual([i.name for i in mo.graph.input], ["x", "x_length", "language", "text_norm"])
        self.assertEqual([o.name for o in mo.graph.output], ["logits"])
        toks = read_tokens(paths["tokens"])
        self.assertEqual(toks[0], "<unk>")
        for t in SPECIAL_TOKENS:
            self.assertIn(t, toks)
        q = onnx.load(paths["int8"])
        ops = {n.op_type for n in q.graph.node}
        self.assertIn("MatMulInteger", ops)
        self.assertLess(os.path.getsize(paths["int8"]), os.path.getsize(paths["model"]))
        with open(paths["reference"]) as f:
            ref = json.load(f)
        self.assertEqual(ref["cases"][1]["logits_shape"], [2, 13, len(toks)])

    def test_fp16_weights_halve_the_file_and_keep_the_logits(self):
        import onnx
        from onnx import TensorProto

        d32, d16 = tempfile.mkdtemp(), tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d32)
        self.addCleanup(shutil.rmtree, d16)
        torch.manual_seed(2)
        m = svm.build(svm.config_for("tiny", **TINY))
        nm, istd = svx.synthetic_cmvn(2)
        with contextlib.redirect_stderr(io.StringIO()):
            p32 = svx.save_bundle(m, char_vocab(), nm, istd, d32, comment="t", reference=True, seed=3)
            p16 = svx.save_bundle(m, char_vocab(), nm, istd, d16, comment="t", reference=True, seed=3, fp16_weights=True)
        self.assertLess(os.path.getsize(p16["model"]), 0.7 * os.path.getsize(p32["model"]))
        g = onnx.load(p16["model"]).graph
        halves = [i for i in g.initializer if i.data_type == TensorProto.FLOAT16]
        self.assertTrue(halves)
        casts = {n.input[0] for n in g.node if n.op_type == "Cast"}
        self.assertLessEqual({i.name for i in halves}, casts)  # every half-precision weight is read through a Cast
        self.assertEqual([i.name for i in g.input], ["x", "x_length", "language", "text_norm"])
        # the reference logits are the rounded model's: close to, not equal to, the float32 model's
        with open(p32["reference"]) as a, open(p16["reference"]) as b:
            r32, r16 = json.load(a), json.load(b)
        l32, l16 = np.array(r32["cases"][0]["logits"]), np.array(r16["cases"][0]["logits"])
        self.assertGreater(np.abs(l32 - l16).max(), 0)
        self.assertLess(np.abs(l32 - l16).max(), 0.05 * max(1.0, np.abs(l32).max()))
        # an unrounded graph is refused rather than silently rounded
        bad = onnx.load(p32["model"])
        with self.assertRaisesRegex(ValueError, "not float16-exact"):
            svx.store_fp16(bad)

    TINY_ARGS = ["--size", "tiny", "--random", "--seed", "20240717", "--int8", "--reference"]

    def committed_tiny(self) -> str:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        tiny = os.path.join(root, "testdata", "sensevoice", "tiny")
        if not os.path.isdir(tiny):
            self.skipTest("no committed tiny model")
        return tiny

    def regenerate(self) -> str:
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            svx.main(self.TINY_ARGS + ["--out", d])
        return d

    @staticmethod
    def differences(got: str, want: str) -> list:
        """What differs between two tiny bundles beyond float rounding across CPUs."""
        diffs = []
        with open(os.path.join(got, "tokens.txt"), "rb") as a, open(os.path.join(want, "tokens.txt"), "rb") as b:
            if a.read() != b.read():
                diffs.append("tokens.txt differs")
        for name in ["model.onnx", "model.int8.onnx"]:
            diffs += [f"{name}: {d}" for d in compare_onnx(os.path.join(got, name), os.path.join(want, name))]
        with open(os.path.join(got, "reference.json")) as a, open(os.path.join(want, "reference.json")) as b:
            diffs += [f"reference.json{d}" for d in compare_reference(json.load(a), json.load(b))]
        return diffs

    def test_committed_tiny_model_is_current(self):
        """testdata/sensevoice/tiny regenerates from the recorded command on this CPU.

        Not byte for byte: weights and logits move in the last bits between CPUs (AVX2,
        AVX-512, ARM), so graph, metadata, integers and tokens must be identical and floats
        agree within a tolerance (train/onnxcompare.py)."""
        tiny = self.committed_tiny()
        diffs = self.differences(self.regenerate(), tiny)
        self.assertEqual(diffs, [], "run `make -C train test-models`:\n" + "\n".join(diffs[:20]))

    def test_current_with_other_cpu_kernels(self):
        """As on a CPU without AVX2/AVX-512: PyTorch's scalar kernels and OpenBLAS's oldest x86
        core give weights and logits that differ in the last bits, and the check still holds."""
        tiny = self.committed_tiny()
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, ATEN_CPU_CAPABILITY="default", OPENBLAS_CORETYPE="Prescott")
        subprocess.run([sys.executable, "-m", "train.sensevoice.export", *self.TINY_ARGS, "--out", d],
                       cwd=root, env=env, check=True, capture_output=True)
        diffs = self.differences(d, tiny)
        self.assertEqual(diffs, [], "\n".join(diffs[:20]))

    def test_real_model_changes_are_caught(self):
        """The tolerant comparison still fails when the model itself changes."""
        tiny = self.committed_tiny()
        build = svm.build

        def eps_changed(cfg):
            m = build(cfg)
            for mod in m.modules():
                if isinstance(mod, torch.nn.LayerNorm):
                    mod.eps = 1e-6
            return m

        enc = svm.sinusoidal_encoding
        cases = {
            "LayerNorm eps": mock.patch.object(svm, "build", eps_changed),
            "scaled positional encoding": mock.patch.object(
                svm, "sinusoidal_encoding", lambda *a, **k: enc(*a, **k) * 1.001),
        }
        for what, patch in cases.items():
            with self.subTest(what), patch:
                self.assertNotEqual(self.differences(self.regenerate(), tiny), [], f"{what} went unnoticed")

    def test_compare_tolerates_cpu_rounding_only(self):
        w = np.linspace(-0.5, 0.5, 1000, dtype=np.float32)
        self.assertEqual(compare_arrays("w", w + np.float32(1.7e-6), w), [])
        self.assertNotEqual(compare_arrays("w", w * np.float32(1.001), w), [])
        self.assertNotEqual(compare_arrays("eps", np.float32([1e-6]), np.float32([1e-5])), [])
        q = np.arange(1000, dtype=np.int64).astype(np.uint8)
        q2 = q.copy()
        q2[:5] += 1
        self.assertEqual(compare_arrays("q", q2, q), [])
        q2[:50] += 1
        self.assertNotEqual(compare_arrays("q", q2, q), [])
        self.assertNotEqual(compare_arrays("i", np.int64([1, 2]), np.int64([1, 3])), [])
        ref = {"cases": [{"name": "a", "logits": [10.0, -3.0], "x": [0.5, 0.125]}]}
        near = {"cases": [{"name": "a", "logits": [10.00005, -3.0], "x": [0.5, 0.125]}]}
        far = {"cases": [{"name": "a", "logits": [10.01, -3.0], "x": [0.5, 0.125]}]}
        self.assertEqual(compare_reference(near, ref), [])
        self.assertNotEqual(compare_reference(far, ref), [])


class DataErrorsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def test_audio_errors(self):
        with self.assertRaisesRegex(AudioError, "missing.wav: audio file not found"):
            load_audio(os.path.join(self.dir, "missing.wav"))
        bad = os.path.join(self.dir, "bad.wav")
        with open(bad, "wb") as f:
            f.write(b"RIFF....WAVEjunk")
        with self.assertRaisesRegex(AudioError, "bad.wav: cannot read audio"):
            load_audio(bad)

    def test_dataset_item_and_resampling(self):
        p = os.path.join(self.dir, "a.wav")
        sf.write(p, (0.1 * np.sin(np.arange(8000) / 7)).astype(np.float32), 8000)
        v = char_vocab()
        ds = SenseVoiceDataset([{"key": "a", "source": p, "source_len": 100, "target": "hi there", "target_len": 2}],
                               v, [0.0] * 560, [1.0] * 560, train=True)
        it = ds[0]
        self.assertEqual(it["x"].shape, (17, 560))  # 1 s at 16 kHz -> 98 fbank frames -> 17 LFR frames
        self.assertEqual(v.decode(it["y"].tolist()), "hi there")
        b = collate([it, it])
        self.assertEqual(b["x"].shape, (2, 17, 560))
        self.assertEqual(b["rich"][0].tolist(), [v.id("<|en|>"), v.id("<|NEUTRAL|>"), v.id("<|Speech|>"), v.id("<|woitn|>")])

    def test_speed_perturbation(self):
        p = os.path.join(self.dir, "s.wav")
        sf.write(p, (0.1 * np.sin(np.arange(32000) / 7)).astype(np.float32), 16000)
        rec = {"key": "s", "source": p, "source_len": 200, "target": "hi", "target_len": 1}
        v = char_vocab()
        plain = SenseVoiceDataset([rec], v, [0.0] * 560, [1.0] * 560, train=True, specaug=False)
        ds = SenseVoiceDataset([rec] * 40, v, [0.0] * 560, [1.0] * 560, train=True, specaug=False, speed_perturb=True)
        n0 = plain[0]["x"].shape[0]
        lengths = {ds[i]["x"].shape[0] for i in range(40)}
        self.assertEqual(len(lengths), 3, lengths)  # 0.9x, 1x and 1.1x all drawn
        self.assertTrue(min(lengths) < n0 < max(lengths))
        ds.set_epoch(1)
        again = [ds[i]["x"].shape[0] for i in range(40)]
        ds.set_epoch(1)
        self.assertEqual(again, [ds[i]["x"].shape[0] for i in range(40)])  # seeded per (epoch, index)
        val = SenseVoiceDataset([rec], v, [0.0] * 560, [1.0] * 560, train=False, speed_perturb=True)
        self.assertEqual(val[0]["x"].shape[0], n0)  # never at evaluation

    def test_overdrive(self):
        x = (0.05 * np.random.default_rng(0).standard_normal(32000)).astype(np.float32)
        for share in (0.002, 0.01, 0.05):
            y = overdrive(x, share, soft=False)
            self.assertLessEqual(float(np.abs(y).max()), 1.0)
            at_full = float(np.mean(np.abs(y) >= 1.0))
            self.assertAlmostEqual(at_full, share, delta=share * 0.2 + 1e-4)
            np.testing.assert_array_equal(np.sign(y), np.sign(x))
        soft = overdrive(x, 0.05, soft=True)
        self.assertLessEqual(float(np.abs(soft).max()), 1.0)
        self.assertGreater(float(np.abs(soft).max()), 0.99)  # driven into the rail, rounded off
        self.assertTrue(np.all(np.diff(soft[np.argsort(x)]) >= 0))  # a monotone curve: no foldover
        silent = np.zeros(100, np.float32)
        np.testing.assert_array_equal(overdrive(silent, 0.01, soft=False), silent)
        with self.assertRaisesRegex(ValueError, "clip share 1.5"):
            overdrive(x, 1.5, soft=False)

    def test_clip_augmentation(self):
        p = os.path.join(self.dir, "c.wav")
        sf.write(p, (0.1 * np.sin(np.arange(32000) / 7)).astype(np.float32), 16000, subtype="FLOAT")
        rec = {"key": "c", "source": p, "source_len": 200, "target": "hi", "target_len": 1}
        v = char_vocab()
        plain = SenseVoiceDataset([rec], v, [0.0] * 560, [1.0] * 560, train=True, specaug=False)
        ds = SenseVoiceDataset([rec] * 40, v, [0.0] * 560, [1.0] * 560, train=True, specaug=False, clip_prob=0.5)
        clips = [ds.clip_for(i) for i in range(40)]
        drawn = [c for c in clips if c is not None]
        self.assertTrue(8 <= len(drawn) <= 32, len(drawn))
        self.assertTrue(all(CLIP_SHARE[0] <= c[0] <= CLIP_SHARE[1] for c in drawn))
        base, i, j = plain[0]["x"], clips.index(drawn[0]), clips.index(None)
        got = ds[i]["x"]
        self.assertEqual(got.shape, base.shape)
        self.assertGreater(float((got - base).abs().mean()), 0.1)  # louder and distorted
        self.assertTrue(torch.equal(ds[j]["x"], base))  # not drawn: the clip as it was
        self.assertTrue(torch.equal(ds[i]["x"], got))  # seeded per (epoch, index)
        ds.set_epoch(1)
        self.assertNotEqual([ds.clip_for(k) for k in range(40)], clips)  # drawn afresh each epoch
        # overdriven and sped up: clipped first, then resampled, as stage P learnt
        both = SenseVoiceDataset([rec] * 40, v, [0.0] * 560, [1.0] * 560, train=True, specaug=False,
                                 speed_perturb=True, clip_prob=1.0)
        k = next(k for k in range(40) if sample_rng(both.seed + 1, 0, k).choice(both.SPEEDS) == 0.9)
        share, soft = both.clip_for(k)
        from scipy.signal import resample_poly

        y = resample_poly(overdrive(sf.read(p, dtype="float32")[0], share, soft), 10, 9).astype(np.float32)
        want = apply_cmvn(features(torch.from_numpy(y)), torch.zeros(560), torch.ones(560))
        torch.testing.assert_close(both[k]["x"], want)
        val = SenseVoiceDataset([rec], v, [0.0] * 560, [1.0] * 560, train=False, clip_prob=1.0)
        self.assertIsNone(val.clip_for(0))  # never at evaluation
        with self.assertRaisesRegex(ValueError, "clip_prob 2"):
            SenseVoiceDataset([rec], v, [0.0] * 560, [1.0] * 560, train=True, clip_prob=2)

    def test_checkpoint_errors(self):
        with self.assertRaisesRegex(CheckpointError, "nope.pt: checkpoint not found"):
            load_checkpoint(os.path.join(self.dir, "nope.pt"))
        junk = os.path.join(self.dir, "junk.pt")
        with open(junk, "wb") as f:
            f.write(b"\x00garbage" * 10)
        with self.assertRaisesRegex(CheckpointError, "junk.pt: unreadable checkpoint"):
            load_checkpoint(junk)
        other = os.path.join(self.dir, "other.pt")
        torch.save({"weights": 1}, other)
        with self.assertRaisesRegex(CheckpointError, "other.pt: not a parley training checkpoint"):
            load_checkpoint(other)

    def test_train_cli_reports_bad_manifest(self):
        man = os.path.join(self.dir, "m.jsonl")
        with open(man, "w") as f:
            f.write('{"key": "a"}\n')
        cmvn = os.path.join(self.dir, "cmvn.json")
        with open(cmvn, "w") as f:
            json.dump({"neg_mean": [0] * 560, "inv_stddev": [1] * 560}, f)
        r = subprocess.run([sys.executable, "-m", "train.sensevoice.train", "--train", man, "--val", man,
                            "--cmvn", cmvn, "--size", "tiny", "--out", self.dir],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"{man}:1: missing field 'source'", r.stderr)


if __name__ == "__main__":
    unittest.main()
