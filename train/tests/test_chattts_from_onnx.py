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

    def test_seeds_from(self):
        """A decoder-only retrain exported with --seeds-from keeps the earlier bundle's seed
        voices (spk_stat, seed filter, suggested seeds) and so its model_id, though the
        retrain's own speaker table moved."""
        import torch

        rc, _, err = run(from_onnx.main, "--model", TINY, "--out", self.dir)
        self.assertEqual(rc, 0, err)
        init = os.path.join(self.dir, "init.pt")
        ckd = torch.load(init, map_location="cpu")
        ckd["spk_stat"] = ckd["spk_stat"] * 1.5  # what re-fitting the speaker table does to it
        moved = os.path.join(self.dir, "moved.pt")
        torch.save(ckd, moved)
        old = os.path.join(self.dir, "old")
        shutil.copytree(TINY, old)
        with open(os.path.join(old, "config.json")) as f:
            conf = json.load(f)
        filt = {"weights": [0.5] * conf["speaker"]["dim"], "bias": -1.0, "tries": 8, "about": "test"}
        conf["speaker"].update(seed_filter=filt, suggested_seeds=[7, 3, 11])
        with open(os.path.join(old, "config.json"), "w") as f:
            json.dump(conf, f)
        plain, kept = os.path.join(self.dir, "plain"), os.path.join(self.dir, "kept")
        self.assertEqual(run(export_main, "--checkpoint", moved, "--out", plain)[0], 0)
        rc, _, err = run(export_main, "--checkpoint", moved, "--seeds-from", old, "--speed", "native", "--out", kept)
        self.assertEqual(rc, 0, err)
        self.assertEqual(err, "")  # model_id kept: no warning

        def stat(d):
            with open(os.path.join(d, "spk_stat.bin"), "rb") as f:
                return f.read()

        def config(d):
            with open(os.path.join(d, "config.json")) as f:
                return json.load(f)

        self.assertNotEqual(stat(plain), stat(old))
        self.assertEqual(stat(kept), stat(old))
        self.assertEqual(config(kept)["speaker"]["seed_filter"], filt)
        self.assertEqual(config(kept)["speaker"]["suggested_seeds"], [7, 3, 11])
        self.assertEqual(config(kept)["speed"], "native")  # later writes keep the seed keys and vice versa
        self.assertNotIn("seed_filter", config(plain)["speaker"])
        want = config(kept)["model_id"]
        self.assertNotEqual(config(plain)["model_id"], want)
        rc, _, err = run(export_main, "--checkpoint", init, "--out", os.path.join(self.dir, "same"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(config(os.path.join(self.dir, "same"))["model_id"], want)  # as the old bundle's seeds make it
        conf["model_id"] = "another"  # a bundle whose DVAE encoder was not this one
        with open(os.path.join(old, "config.json"), "w") as f:
            json.dump(conf, f)
        rc, _, err = run(export_main, "--checkpoint", moved, "--seeds-from", old, "--out", os.path.join(self.dir, "v"))
        self.assertEqual(rc, 0, err)
        self.assertIn("is not " + old + "'s another: the DVAE encoder changed", err)
        # refusals name the file and what is wrong
        with self.assertRaises(SystemExit) as e:
            run(export_main, "--checkpoint", moved, "--seeds-from", self.dir, "--out", os.path.join(self.dir, "x"))
        self.assertIn("config.json: not an exported voice's config", str(e.exception))
        conf["speaker"]["seed_filter"] = {"weights": [0.5] * 3, "bias": 0.0}
        with open(os.path.join(old, "config.json"), "w") as f:
            json.dump(conf, f)
        with self.assertRaises(SystemExit) as e:
            run(export_main, "--checkpoint", moved, "--seeds-from", old, "--out", os.path.join(self.dir, "w"))
        self.assertIn("speaker.seed_filter is not a filter of 16 weights", str(e.exception))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "w")))  # refused before anything is written
        conf["speaker"]["seed_filter"] = filt
        with open(os.path.join(old, "config.json"), "w") as f:
            json.dump(conf, f)
        with open(os.path.join(old, "spk_stat.bin"), "ab") as f:
            f.write(b"\x00" * 4)
        with self.assertRaises(SystemExit) as e:
            run(export_main, "--checkpoint", moved, "--seeds-from", old, "--out", os.path.join(self.dir, "y"))
        self.assertIn("spk_stat.bin: spk_stat has 33 values, want 32", str(e.exception))
        with self.assertRaises(SystemExit) as e, redirect_stderr(io.StringIO()) as usage:
            export_main(["--random", "--seeds-from", old, "--out", os.path.join(self.dir, "z")])
        self.assertEqual(e.exception.code, 2)
        self.assertIn("--seeds-from goes with --checkpoint", usage.getvalue())

    def test_fp16_gpt_round_trip(self):
        """--fp16-gpt stores gpt.onnx's large weights as float16 (smaller file, same graph
        interface), the reference comes from the rounded weights, and from_onnx recovers exactly
        those weights and checks them by exporting them again the same way."""
        import numpy as np
        import onnx
        from onnx import numpy_helper

        rc, _, err = run(from_onnx.main, "--model", TINY, "--out", self.dir)
        self.assertEqual(rc, 0, err)
        ck = os.path.join(self.dir, "init.pt")
        d32, d16 = os.path.join(self.dir, "e32"), os.path.join(self.dir, "e16")
        for d, extra in ((d32, []), (d16, ["--fp16-gpt"])):
            rc, _, err = run(export_main, "--checkpoint", ck, "--reference", "--int8", "--out", d, *extra)
            self.assertEqual(rc, 0, err)
        g32, g16 = onnx.load(os.path.join(d32, "gpt.onnx")), onnx.load(os.path.join(d16, "gpt.onnx"))
        self.assertEqual([i.name for i in g16.graph.input], [i.name for i in g32.graph.input])
        self.assertEqual([o.name for o in g16.graph.output], [o.name for o in g32.graph.output])
        self.assertEqual({p.key: p.value for p in g16.metadata_props}.get("weights_float16"), "true")
        halves = [t for t in g16.graph.initializer if t.data_type == onnx.TensorProto.FLOAT16]
        self.assertGreater(len(halves), 0)
        self.assertLess(os.path.getsize(os.path.join(d16, "gpt.onnx")), 0.75 * os.path.getsize(os.path.join(d32, "gpt.onnx")))
        # the other graphs are untouched; the int8 GPT is quantized from the rounded weights
        for g in ("decoder", "vocos", "dvae_encoder"):
            self.assertEqual(compare_onnx(os.path.join(d16, g + ".onnx"), os.path.join(d32, g + ".onnx")), [], g)
        self.assertTrue(os.path.isfile(os.path.join(d16, "gpt.int8.onnx")))
        # each float16 weight is its float32 twin rounded
        w32 = {t.name: numpy_helper.to_array(t) for t in g32.graph.initializer}
        for t in halves:
            name = t.name[: -len("_fp16")]
            if name in w32:
                np.testing.assert_array_equal(numpy_helper.to_array(t), w32[name].astype(np.float16))
        # the references differ by the rounding only
        with open(os.path.join(d32, "reference.json")) as a, open(os.path.join(d16, "reference.json")) as b:
            r32, r16 = json.load(a), json.load(b)
        self.assertEqual(r32["tokenizer"], r16["tokenizer"])
        self.assertEqual(r32["speaker"], r16["speaker"])
        # recovered: the rounded weights come back and export the same fp16 bundle again
        rec = os.path.join(self.dir, "rec")
        rc, out, err = run(from_onnx.main, "--model", d16, "--out", rec)
        self.assertEqual(rc, 0, err)
        again = os.path.join(self.dir, "again")
        rc, _, err = run(export_main, "--checkpoint", os.path.join(rec, "init.pt"), "--fp16-gpt", "--out", again)
        self.assertEqual(rc, 0, err)
        for g in from_onnx.GRAPHS:
            self.assertEqual(compare_onnx(os.path.join(again, g + ".onnx"), os.path.join(d16, g + ".onnx")), [], g)

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


class Recovered(unittest.TestCase):
    """A test with the tiny bundle recovered as a PyTorch checkpoint at self.init."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="parley-ctts-")
        rc, _, err = run(from_onnx.main, "--model", TINY, "--out", self.dir)
        self.assertEqual(rc, 0, err)
        self.init = os.path.join(self.dir, "init.pt")

    def tearDown(self):
        shutil.rmtree(self.dir)


class ContinueTrainingTest(Recovered):
    """A recovered bundle is a starting point for more demo-voice phases (make -C train
    demo-tts-more): every tensor but the lost speaker table comes from it, the table starts as
    seed speakers of its spk_stat, and ``--only speakers`` re-fits the table alone."""

    def model(self, n_spk):
        import torch

        from train.chattts.config import ChatTTSConfig
        from train.chattts.train import DemoModel

        ck = torch.load(self.init, map_location="cpu")
        return DemoModel(ChatTTSConfig.from_dict(ck["config"]), n_spk), ck

    def test_load_init_and_refit_speakers(self):
        import torch

        from train.chattts.train import collate_gpt, load_init
        from train.chattts.tokenizer import WordPieceTokenizer

        torch.manual_seed(0)
        m, ck = self.model(4000)
        load_init(m, self.init)
        own = m.state_dict()
        for k, v in ck["model"].items():
            self.assertTrue(torch.equal(own[k], v), k)
        h = m.speakers.weight.shape[1]
        stat = ck["spk_stat"].float().view(-1)
        w = m.speakers.weight.detach()
        self.assertLess((w.mean(0) - stat[h:]).abs().max().item(), 0.2 * stat[:h].max().item() + 1e-3)
        self.assertLess((w.std(0) / stat[:h] - 1).abs().max().item(), 0.1)

        m.set_stage("gpt", ["speakers"])
        tok = WordPieceTokenizer(ck["tokenizer"])
        p = tok.encode("[Stts][spk_emb]hello[Ptts]")
        b = collate_gpt([{"prompt": torch.tensor(p), "codes": torch.randint(0, 625, (5, ck["config"]["gpt"]["num_vq"])),
                          "mel": torch.randn(ck["config"]["n_mels"], 10), "speaker": 7,
                          "spk_emb_id": tok.token_id("[spk_emb]")}])
        loss, _ = m(b)
        loss.backward()
        trained = {n for n, q in m.named_parameters() if q.grad is not None and q.grad.abs().sum() > 0}
        self.assertEqual(trained, {"speakers.weight"})
        with self.assertRaisesRegex(ValueError, "vocos"):
            m.set_stage("gpt", ["vocos"])

    def test_misfits_are_named(self):
        import torch

        from train.chattts.train import load_init

        ck = torch.load(self.init, map_location="cpu")
        name = next(k for k in ck["model"] if k.startswith("gpt."))
        bad = dict(ck)
        bad["model"] = dict(ck["model"])
        bad["model"][name] = torch.zeros(3, 3)
        p = os.path.join(self.dir, "bad.pt")
        torch.save(bad, p)
        m, _ = self.model(2)
        with self.assertRaisesRegex(SystemExit, name):
            load_init(m, p)
        bad["model"] = dict(ck["model"])
        bad["model"]["gpt.extra"] = torch.zeros(1)
        torch.save(bad, p)
        with self.assertRaisesRegex(SystemExit, "gpt.extra"):
            load_init(m, p)

    def test_larger_tokenizer_keeps_rows_by_token(self):
        """A corpus whose tokenizer adds tokens (the human-derived voices' IPA) starts from a
        bundle trained on fewer: every shared token keeps its row under its new id; a bundle
        token the corpus lacks is refused by name."""
        import dataclasses

        import torch

        from train.chattts.config import ChatTTSConfig
        from train.chattts.train import DemoModel, TEXT_ROWS, load_init

        ck = torch.load(self.init, map_location="cpu")
        old = ck["tokenizer"]["model"]["vocab"]
        # two new tokens inserted at the front of the word pieces: every later id moves by 2
        first = min(i for t, i in old.items() if not t.startswith("["))
        vocab = {t: (i if i < first else i + 2) for t, i in old.items()}
        vocab["ʔ"], vocab["##ʔ"] = first, first + 1
        cfg = ChatTTSConfig.from_dict(ck["config"])
        big = dataclasses.replace(cfg, gpt=dataclasses.replace(cfg.gpt, num_text_tokens=len(vocab)))
        m = DemoModel(big, 3)
        fresh = {k: v.clone() for k, v in m.state_dict().items() if k in TEXT_ROWS}
        load_init(m, self.init, vocab=vocab)
        own = m.state_dict()
        for k in TEXT_ROWS:
            for tok, i in old.items():
                self.assertTrue(torch.equal(own[k][vocab[tok]], ck["model"][k][i]), (k, tok))
            self.assertTrue(torch.equal(own[k][first], fresh[k][first]), k)
        del vocab["a"]
        with self.assertRaisesRegex(SystemExit, "lacks.*'a'"):
            load_init(DemoModel(big, 3), self.init, vocab=vocab)

    def test_deepen(self):
        """--deepen: a checkpoint with fewer GPT layers starts a deeper model that says exactly
        what it said (the new top layers are the identity) and whose new layers then learn;
        without --deepen the missing layers are named."""
        import dataclasses

        import torch

        from train.chattts.config import ChatTTSConfig
        from train.chattts.train import DemoModel, load_init

        ck = torch.load(self.init, map_location="cpu")
        cfg = ChatTTSConfig.from_dict(ck["config"])
        n = cfg.gpt.layers
        deep = dataclasses.replace(cfg, gpt=dataclasses.replace(cfg.gpt, layers=n + 2))
        torch.manual_seed(1)
        shallow, _ = self.model(3)
        load_init(shallow, self.init)
        m = DemoModel(deep, 3)
        with self.assertRaisesRegex(SystemExit, f"gpt.layers.{n}."):
            load_init(m, self.init)
        m = DemoModel(deep, 3)
        load_init(m, self.init, deepen=True)
        m.speakers.weight.data.copy_(shallow.speakers.weight.data)
        x = torch.randn(2, 9, cfg.gpt.hidden)
        pos = torch.arange(9).unsqueeze(0).expand(2, -1)
        am = torch.ones(2, 9, dtype=torch.long)
        shallow.eval()
        m.eval()
        with torch.no_grad():
            a, _ = shallow.gpt(x, am, pos)
            b, _ = m.gpt(x, am, pos)
        self.assertEqual(len(m.gpt.layers), n + 2)
        self.assertLess((a - b).abs().max().item(), 1e-6)
        m.train()
        h, _ = m.gpt(x, am, pos)
        h.pow(2).sum().backward()
        top = m.gpt.layers[n]
        self.assertGreater(top.self_attn.o_proj.weight.grad.abs().sum().item(), 0)
        self.assertGreater(top.mlp.down_proj.weight.grad.abs().sum().item(), 0)

    def test_deepen_decoder(self):
        """--deepen grows the decoder too: the deeper decoder gives the same mel at first and
        its new blocks then learn; without --deepen the missing blocks are named."""
        import dataclasses

        import torch

        from train.chattts.config import SIZES, ChatTTSConfig
        from train.chattts.train import DemoModel, block_count, load_init

        self.assertEqual(SIZES["demo-dec12"]["decoder"].n_layer, 12)
        self.assertEqual(SIZES["demo-dec12"]["gpt"], SIZES["demo"]["gpt"])
        ck = torch.load(self.init, map_location="cpu")
        cfg = ChatTTSConfig.from_dict(ck["config"])
        n = cfg.decoder.n_layer
        self.assertEqual(block_count(ck["model"], "decoder.decoder.decoder_block."), n)
        deep = dataclasses.replace(cfg, decoder=dataclasses.replace(cfg.decoder, n_layer=n + 3))
        shallow, _ = self.model(3)
        load_init(shallow, self.init)
        with self.assertRaisesRegex(SystemExit, f"decoder.decoder.decoder_block.{n}."):
            load_init(DemoModel(deep, 3), self.init)
        m = DemoModel(deep, 3)
        load_init(m, self.init, deepen=True)
        x = torch.randn(2, cfg.decoder.idim, 11)
        shallow.eval()
        m.eval()
        with torch.no_grad():
            a, b = shallow.decoder.decoder(x), m.decoder.decoder(x)
        self.assertEqual(len(m.decoder.decoder.decoder_block), n + 3)
        self.assertLess((a - b).abs().max().item(), 1e-6)
        m.train()
        m.decoder.decoder(x).pow(2).sum().backward()
        new = m.decoder.decoder.decoder_block[n]
        self.assertGreater(new.weight.grad.abs().sum().item(), 0)


class GPUPackTest(Recovered):
    """A GPT phase away from the features (train/chattts/gpu_phase.sh): pack carries the codes
    and the GPT only; the run records the parts it never had, export refuses its model until
    merge --base puts them back, and ``--only decoder`` then fits the decoder alone."""

    def feats(self, tok_spec, name: str = "feats", first_speaker: int = 0) -> str:
        """A features dir of 6 utterances by 2 speakers, with mel and DVAE codes."""
        import numpy as np

        d = os.path.join(self.dir, name)
        os.makedirs(d)
        for split, n in (("train", 6), ("val", 2)):
            rng = np.random.default_rng(len(split))
            index, codes, offs, mels = [], [], [], 0
            for i in range(n):
                t = 3 + i
                spk = first_speaker + i % 2
                index.append({"key": f"{split}-{i}", "phonemes": "hello world", "speed": 5, "speaker": f"s{spk}",
                              "speaker_index": spk, "m0": mels, "m1": mels + 2 * t, "a0": 0, "a1": 0, "text": "x"})
                offs.append([len(codes), len(codes) + t])
                codes += rng.integers(0, 625, (t, 4)).tolist()
                mels += 2 * t
            with open(os.path.join(d, f"{split}.index.json"), "w") as f:
                json.dump(index, f)
            with open(os.path.join(d, f"{split}.codes.json"), "w") as f:
                json.dump(offs, f)
            np.save(os.path.join(d, f"{split}.codes.npy"), np.array(codes, dtype=np.int16))
            np.save(os.path.join(d, f"{split}.mel.npy"), rng.standard_normal((mels, 100)).astype(np.float16))
            np.save(os.path.join(d, f"{split}.audio.npy"), np.zeros(10, dtype=np.int16))
        with open(os.path.join(d, "tokenizer.json"), "w") as f:
            json.dump(tok_spec, f)
        with open(os.path.join(d, "coef.json"), "w") as f:
            json.dump({"coef": [1.0] * 100, "utterances": 6}, f)
        return d

    def test_pack_without_the_gpt_rebuilt_from_the_bundle(self):
        import tarfile

        import torch

        from train.chattts.train import main as train_main

        base = torch.load(self.init, map_location="cpu")
        table = torch.randn(3, base["model"]["embed.emb_text.weight"].shape[1])
        ck = dict(base, model=dict(base["model"], **{"speakers.weight": table}), speakers=["a", "b", "c"])
        ck_path = os.path.join(self.dir, "trained.pt")
        torch.save(ck, ck_path)
        feats = self.feats(base["tokenizer"])
        pack = os.path.join(self.dir, "small.tar.xz")
        rc, _, err = run(train_main, "pack", "--feats", feats, "--checkpoint", ck_path, "--bundle", TINY, "--out", pack)
        self.assertEqual(rc, 0, err)
        with tarfile.open(pack) as t:
            names = sorted(t.getnames())
            self.assertNotIn("init.pt", names)
            self.assertIn("speakers.pt", names)
            t.extractall(os.path.join(self.dir, "packed"))
        packed = os.path.join(self.dir, "packed")
        rc, out, err = run(train_main, "bundle-init", "--feats", packed, "--bundle", TINY)
        self.assertEqual(rc, 0, err)
        init = torch.load(os.path.join(packed, "init.pt"), map_location="cpu")
        self.assertEqual(init["speakers"], ["a", "b", "c"])
        self.assertTrue(torch.equal(init["model"]["speakers.weight"].float(), table.half().float()))
        for k, v in base["model"].items():
            if k.split(".", 1)[0] in ("gpt", "embed") and "parametrizations" not in k:
                self.assertLess((init["model"][k].float() - v.float()).abs().max().item(), 2e-3, k)
        # the phase starts from it as from a pack with its GPT inside
        rc, _, err = run(train_main, "gpt", "--feats", packed, "--init", os.path.join(packed, "init.pt"),
                         "--out", os.path.join(self.dir, "run"), "--epochs", "1", "--max-steps", "1",
                         "--batch-size", "200", "--device", "cpu", "--seed", "3")
        self.assertEqual(rc, 0, err)

        # no training checkpoint (a fresh checkout): the bundle alone, no table (gpu_phase re-fits it)
        bare = os.path.join(self.dir, "bare.tar.xz")
        rc, _, err = run(train_main, "pack", "--feats", feats, "--bundle", TINY, "--out", bare)
        self.assertEqual(rc, 0, err)
        with tarfile.open(bare) as t:
            self.assertFalse({"init.pt", "speakers.pt"} & set(t.getnames()))
            t.extractall(os.path.join(self.dir, "bare"))
        rc, _, err = run(train_main, "bundle-init", "--feats", os.path.join(self.dir, "bare"), "--bundle", TINY)
        self.assertEqual(rc, 0, err)
        got = torch.load(os.path.join(self.dir, "bare", "init.pt"), map_location="cpu")
        self.assertNotIn("speakers.weight", got["model"])
        self.assertEqual(got["size"], base["size"])
        rc, _, err = run(train_main, "gpt", "--feats", os.path.join(self.dir, "bare"), "--only", "speakers",
                         "--init", os.path.join(self.dir, "bare", "init.pt"), "--out", os.path.join(self.dir, "spk"),
                         "--epochs", "1", "--max-steps", "1", "--batch-size", "200", "--device", "cpu")
        self.assertEqual(rc, 0, err)

        # another bundle than the one the pack names is refused before any work
        with open(os.path.join(packed, "bundle.json")) as f:
            meta = json.load(f)
        with open(os.path.join(packed, "bundle.json"), "w") as f:
            json.dump(dict(meta, gpt_sha256="0" * 64), f)
        with self.assertRaisesRegex(ValueError, "not the GPT the pack was made with"):
            from train.chattts.train import bundle_init
            bundle_init(packed, TINY)
        # a checkpoint whose GPT the bundle does not hold is refused at pack time
        moved = dict(ck, model={k: (v + 0.1 if k.startswith("gpt.") and v.is_floating_point() else v)
                                for k, v in ck["model"].items()})
        torch.save(moved, ck_path)
        with self.assertRaisesRegex(ValueError, "not an export of this checkpoint"):
            run(train_main, "pack", "--feats", feats, "--checkpoint", ck_path, "--bundle", TINY,
                "--out", os.path.join(self.dir, "bad.tar.xz"))
        self.assertEqual([f for f in os.listdir(self.dir) if f.startswith("bad")], [])

    def test_pack_train_merge_base_and_fit_the_decoder(self):
        import tarfile

        import torch

        from train.chattts import checkpoint as ck_mod
        from train.chattts.train import main as train_main
        from train.trainer import load_torch

        base = torch.load(self.init, map_location="cpu")
        feats = self.feats(base["tokenizer"])
        pack = os.path.join(self.dir, "pack.tar.xz")
        more = self.feats(base["tokenizer"], "more", first_speaker=2)  # two more speakers
        rc, _, err = run(train_main, "pack", "--feats", feats, "--more-feats", more, "--checkpoint", self.init,
                         "--out", pack)
        self.assertEqual(rc, 0, err)
        with tarfile.open(pack) as t:
            names = sorted(t.getnames())
        self.assertEqual(names, ["coef.json", "init.pt", "tokenizer.json", "train.codes.json", "train.codes.npy",
                                 "train.index.json", "val.codes.json", "val.codes.npy", "val.index.json"])
        packed = os.path.join(self.dir, "packed")
        with tarfile.open(pack) as t:
            t.extractall(packed)
        small = torch.load(os.path.join(packed, "init.pt"), map_location="cpu")
        self.assertEqual({k.split(".", 1)[0] for k in small["model"]}, {"gpt", "embed"})
        self.assertEqual({v.dtype for v in small["model"].values()}, {torch.float16})
        from train.chattts.train import Feats

        f = Feats(packed, "train")
        self.assertEqual(sorted(f.index[0]), ["key", "phonemes", "speaker", "speaker_index", "speed"])
        self.assertEqual([r["speaker_index"] for r in f.index], [0, 1] * 3 + [2, 3] * 3)
        self.assertIsNone(f.mel)
        for i, src in enumerate([Feats(feats, "train")] * 6 + [Feats(more, "train")] * 6):
            self.assertTrue((f.get_codes(i) == src.get_codes(i % 6)).all(), i)
        self.assertEqual(len(Feats(packed, "val")), 2)

        # the phase, from the pack alone: no mel, so no decoder loss; the parts it never had are named
        flags = ["--epochs", "1", "--max-steps", "2", "--batch-size", "200", "--device", "cpu", "--seed", "3",
                 "--neutral-streams", "1,3", "--sched-sampling", "0.8", "--sched-passes", "2"]
        run_dir = os.path.join(self.dir, "run")
        rc, _, err = run(train_main, "gpt", "--feats", packed, "--init", os.path.join(packed, "init.pt"),
                         "--out", run_dir, *flags)
        self.assertEqual(rc, 0, err)
        last = sorted(f for f in os.listdir(run_dir) if f.startswith("ckpt-"))[-1]
        trained = load_torch(os.path.join(run_dir, last))
        self.assertEqual(trained["untrained"], ["decoder", "dvae", "vocos"])
        self.assertEqual(trained["model"]["speakers.weight"].shape[0], 4)
        self.assertEqual(trained["speakers"], ["s0", "s1", "s2", "s3"])
        moved = [k for k, v in base["model"].items() if k.startswith("gpt.")
                 and not torch.allclose(trained["model"][k], v.float(), atol=1e-3)]
        self.assertTrue(moved, "the GPT did not train")

        # the raw checkpoint as a start on the features with mel: the decoder now trains, so it
        # is no longer listed; Vocos and the DVAE, which the gpt stage never trains, still are
        again = os.path.join(self.dir, "again")
        rc, _, err = run(train_main, "gpt", "--feats", feats, "--init", os.path.join(run_dir, last), "--out", again,
                         *flags)
        self.assertEqual(rc, 0, err)
        again_last = sorted(f for f in os.listdir(again) if f.startswith("ckpt-"))[-1]
        self.assertEqual(load_torch(os.path.join(again, again_last))["untrained"], ["dvae", "vocos"])

        split = os.path.join(self.dir, "model")
        rc, _, err = run(train_main, "merge", "--feats", packed, "--checkpoint", os.path.join(run_dir, last),
                         "--split-mb", "0.02", "--out", split)
        self.assertEqual(rc, 0, err)
        self.assertGreater(len(os.listdir(split)), 1)
        with self.assertRaisesRegex(ck_mod.CheckpointError, "decoder, dvae, vocos never trained"):
            ck_mod.load_ours(split)
        whole = os.path.join(self.dir, "whole.pt")
        rc, _, err = run(train_main, "merge", "--feats", packed, "--checkpoint", split, "--base", self.init,
                         "--out", whole)
        self.assertEqual(rc, 0, err)
        m, got = ck_mod.load_ours(whole)
        self.assertNotIn("untrained", got)
        for k, v in base["model"].items():
            want = v if k.split(".", 1)[0] in ("decoder", "dvae", "vocos") else trained["model"][k]
            self.assertTrue(torch.equal(got["model"][k], want), k)

        # the decoder fitted to the new GPT on the features with mel, nothing else moving
        fit = os.path.join(self.dir, "fit")
        rc, _, err = run(train_main, "gpt", "--feats", feats, "--init", whole, "--only", "decoder", "--out", fit,
                         "--ga-weight", "0", "--code-dropout", "0", "--lr", "1e-2", *flags)
        self.assertEqual(rc, 0, err)
        last = sorted(f for f in os.listdir(fit) if f.startswith("ckpt-"))[-1]
        after = load_torch(os.path.join(fit, last))
        self.assertEqual(after["untrained"], [])
        # the features have 2 speakers, the model 4: the table and its names are kept
        self.assertEqual(after["speakers"], ["s0", "s1", "s2", "s3"])
        changed = {k.split(".", 1)[0] for k, v in got["model"].items() if not torch.equal(after["model"][k], v)}
        self.assertEqual(changed, {"decoder"})
