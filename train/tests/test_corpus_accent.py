"""English from festival's Czech and Finnish voices (train.corpus.accent) and the builder's
accented voice set."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

import numpy as np

from train.corpus import accent as AC
from train.corpus import build as B
from train.corpus import text as T
from train.corpus import voices as V
from train.tests.test_corpus_human import f0_median, small_pool

FEST = "/usr/share/festival/voices"
HAVE_FRONT = shutil.which("festival") is not None and os.path.isdir(f"{FEST}/english/kal_diphone")
INSTALLED = [v for v in AC.ACCENTED.values() if HAVE_FRONT and os.path.isdir(os.path.join(FEST, v.voice_dir))]
# The phones kal_diphone's front end says (festival's radio set less the ones its lexicon and
# letter-to-sound rules never give: axr, dx, el, em, en, hv, nx) but the silence.
RADIO = ("aa ae ah ao aw ax ay b ch d dh eh er ey f g hh ih iy jh k l m n ng ow oy p r s sh t th uh uw "
         "v w y z zh").split()


class PlanTest(unittest.TestCase):
    def test_every_english_phone_has_a_place(self):
        for lang, table in AC.MAPS.items():
            self.assertEqual(set(RADIO) | {"pau"}, set(table), lang)
        for v in AC.ACCENTED.values():
            self.assertEqual(set(AC.phone_map(v)), set(RADIO) | {"pau"}, v.id)
            self.assertIs(V.voice(v.id), v)

    def test_durations_and_pitch_move(self):
        segs = [("pau", 0.2, []), ("hh", 0.06, [(0.0, 105.0)]), ("ay", 0.2, [(0.05, 125.0), (0.15, 95.0)]),
                ("pau", 0.3, [])]
        table = {**AC.MAPS["cs"], "hh": ()}  # a language without h
        it = AC.plan(segs, table, f0=210, f0_range=1.0)
        # no h: its time and target go to the next phone; the diphthong is two phones, 0.6 / 0.4
        self.assertEqual([p for p, _, _ in it], ["#", "a", "j", "#"])
        self.assertAlmostEqual(sum(d for _, d, _ in it), 0.76, places=6)
        self.assertAlmostEqual(it[1][1], 0.156, places=6)
        self.assertAlmostEqual(it[2][1], 0.104, places=6)
        # times inside each phone; the front end's mean moves to f0, excursions scale with it
        want = [[(0.0, 210.0), (0.11, 250.0)], [(0.054, 190.0)]]
        for (_, _, got), exp in zip(it[1:3], want):
            self.assertEqual(len(got), len(exp))
            for (t, hz), (et, ehz) in zip(got, exp):
                self.assertAlmostEqual(t, et, places=6)
                self.assertAlmostEqual(hz, ehz, places=6)
        flat = AC.plan(segs, table, f0=210, f0_range=0.5)
        fhz = [h for _, _, tg in flat for _, h in tg]
        self.assertAlmostEqual(fhz[1] - fhz[2], (125 - 95) * 2 * 0.5, delta=1e-6)
        # a dropped phone at the end gives its time to the last phone
        end = AC.plan([("ah", 0.1, []), ("hh", 0.05, [(0.01, 105.0)])], table, 210, 1.0)
        self.assertEqual(len(end), 1)
        self.assertAlmostEqual(end[0][1], 0.15, places=6)
        self.assertAlmostEqual(end[0][2][0][0], 0.11, places=6)
        with self.assertRaisesRegex(V.SynthError, "no cs phone"):
            AC.plan([("qq", 0.1, [])], AC.MAPS["cs"], 200, 1.0, "cs")

    def test_scheme_keeps_targets_inside_their_phone(self):
        s = AC.segments_scheme([("a", 0.1, [(-0.01, 200.0), (0.3, 180.0)]), ("#", 0.2, [])])
        self.assertEqual(s, "(Utterance Segments ((a 0.1000 (0.0000 200.0) (0.1000 180.0)) (# 0.2000)))")

    def test_repair_says_missing_pairs_as_speakers_would(self):
        def have_all_but(phones, *lacking):
            return frozenset((x, y) for x in phones for y in phones) - set(lacking)

        cs = have_all_but(["#", "a", "i", "j", "d", "t", "z", "s", "k"], ("d", "t"), ("z", "#"), ("i", "a"), ("a", "i"),
                          ("a", "k"), ("k", "k"))
        seg = lambda *ps: [(p, 0.1, [(0.08, 200.0)]) for p in ps]  # noqa: E731

        def names(r):
            return [p for p, _, _ in r]

        # Czech: the first obstruent takes the second's voicing; a final one is voiceless
        self.assertEqual(names(AC.repair(seg("a", "d", "k", "a"), cs, "cs")), ["a", "d", "k", "a"])  # d-k recorded
        dk = cs - {("d", "k")}
        self.assertEqual(names(AC.repair(seg("a", "d", "k", "a"), dk, "cs")), ["a", "t", "k", "a"])
        # ... unless that breaks the pair before: then a break instead
        self.assertEqual(names(AC.repair(seg("a", "d", "k", "a"), dk - {("a", "t")}, "cs")), ["a", "d", "#", "k", "a"])
        # d before t: t t ("good time"), or one long t where the voice has no t-t
        self.assertEqual(names(AC.repair(seg("a", "d", "t", "a"), cs, "cs")), ["a", "t", "t", "a"])
        dt = AC.repair(seg("a", "d", "t", "a"), cs - {("t", "t")}, "cs")
        self.assertEqual(names(dt), ["a", "t", "a"])
        self.assertAlmostEqual(dt[1][1], 0.2, places=6)
        self.assertEqual(names(AC.repair(seg("a", "z", "#"), cs, "cs")), ["a", "s", "#"])
        # hiatus: a j after a front vowel, a short break after another; the bridge's time and
        # the targets past it come from the phone before, so the whole keeps its length
        ij = AC.repair(seg("i", "a"), cs, "cs")
        self.assertEqual(names(ij), ["i", "j", "a"])
        self.assertAlmostEqual(ij[0][1], 0.1 - AC.BRIDGE_S["j"], places=6)
        self.assertEqual(ij[0][2], [])
        self.assertAlmostEqual(ij[1][2][0][0], 0.08 - ij[0][1], places=6)
        ai = AC.repair(seg("a", "i"), cs, "cs")
        self.assertEqual(names(ai), ["a", "#", "i"])
        for r in (ij, ai):
            self.assertAlmostEqual(sum(d for _, d, _ in r), 0.2, places=6)
        # a doubled consonant the voice never recorded is one long one, its targets kept in place
        kk = AC.repair(seg("a", "k", "k"), cs | {("a", "k")}, "cs")
        self.assertEqual(names(kk), ["a", "k"])
        self.assertAlmostEqual(kk[1][1], 0.2, places=6)
        self.assertEqual([t for t, _ in kk[1][2]], [0.08, 0.18])
        # Finnish: a vowel after a final consonant (where both diphones exist), else a break
        fi = have_all_but(["#", "a", "i", "l", "m"], ("l", "#"), ("m", "#"), ("i", "#"))
        self.assertEqual(names(AC.repair(seg("a", "l", "#"), fi | {("i", "#")}, "fi")), ["a", "l", "i", "#"])
        self.assertEqual(names(AC.repair(seg("a", "m", "#"), fi, "fi")), ["a", "m", "#"])  # nothing fits: kept
        # a bridge takes at most half the phone before it
        short = AC.repair([("i", 0.02, []), ("a", 0.1, [])], cs, "cs")
        self.assertEqual(names(short), ["i", "j", "a"])
        self.assertAlmostEqual(short[0][1], 0.01, places=6)
        self.assertAlmostEqual(short[1][1], 0.01, places=6)
        # pairs the voice has are never touched; nothing in, nothing out
        plain = seg("a", "d", "a", "#")
        self.assertEqual(AC.repair(plain, cs, "cs"), plain)
        self.assertEqual(AC.repair([], cs, "cs"), [])

    def test_unknown_language(self):
        v = V.Voice("festival:x", "festival", "x", "x", "festvox-x", "m", 100, True, "xx", "x/x")
        with self.assertRaisesRegex(ValueError, "no phone map"):
            AC.synthesize_accented(["hi"], v, [V.Knobs()])
        with self.assertRaisesRegex(V.VoiceMissing, "festival:x.*apt-get install festvox-x"):
            V.check(v)


@unittest.skipUnless(INSTALLED, "festival's Czech/Finnish voices not installed")
class SpeakTest(unittest.TestCase):
    def test_each_voice_speaks_english_at_its_pitch(self):
        text = "hello there, how are you today? set a timer for ten minutes"
        for v in INSTALLED:
            with self.subTest(v.id):
                lo, hi, slow = V.synthesize_many([text, text, text], v,
                                                 [V.Knobs(f0=130), V.Knobs(f0=240), V.Knobs(f0=130, stretch=1.5)])
                for x in (lo, hi, slow):
                    self.assertIsNotNone(x)
                    self.assertEqual(x.dtype, np.float32)
                self.assertGreater(len(lo), V.SR)
                self.assertAlmostEqual(f0_median(lo) / 130, 1, delta=0.2)
                self.assertAlmostEqual(f0_median(hi) / 240, 1, delta=0.2)
                self.assertGreater(len(slow) / len(lo), 1.3)

    def test_every_mapped_phone_has_its_diphones(self):
        # a diphone the voice lacks is played as silence: the maps keep to the ones recorded
        # beside vowels (what remains missing are a language's own gaps: Czech voiced before
        # voiceless consonants, vowel hiatus, final voiced consonants; lj's final consonants)
        def vowel(p):
            return p[0] in "aeiouy@"

        for v in INSTALLED:
            with self.subTest(v.id):
                pairs = [m.split("-") for m in AC.missing_diphones(v, contexts=("a", "t"))]
                cv = [f"{x}-{y}" for x, y in pairs if vowel(x) != vowel(y)]  # consonant beside vowel
                self.assertEqual(cv, [], f"{v.id} lacks {cv}")

    def test_repair_mends_what_the_voice_lacks(self):
        # the inventory (one scan of every pair) agrees with festival's own report, and the
        # repaired plan of real English has fewer pairs the voice would play as silence
        texts = ["a good time for the big game", "the idea is old and his bag is full", "think of the ring"]
        segs = AC.analyse(texts, [1.0] * len(texts))
        for v in INSTALLED:
            with self.subTest(v.id):
                have = AC.recorded_diphones(v)
                ps = AC._phones(v)
                self.assertIn(("a", "t"), have)
                self.assertIn(("t", "a"), have)
                self.assertTrue(len(ps) ** 2 * 0.5 < len(have) < len(ps) ** 2, f"{len(have)} of {len(ps) ** 2}")
                for m in AC.missing_diphones(v, contexts=("a", "t")):
                    self.assertNotIn(tuple(m.split("-")), have)
                before = after = 0
                for s in segs:
                    p = AC.plan(s, AC.phone_map(v), v.f0, 1.0, v.lang)
                    r = AC.repair(p, have, v.lang)
                    before += sum((a[0], b[0]) not in have for a, b in zip(p, p[1:]))
                    after += sum((a[0], b[0]) not in have for a, b in zip(r, r[1:]))
                    self.assertAlmostEqual(sum(d for _, d, _ in r), sum(d for _, d, _ in p), places=6)
                self.assertLessEqual(after, before)
                if before:
                    self.assertLess(after, before)
                x, y = V.synthesize_many([texts[0]] * 2, v, [V.Knobs(), V.Knobs(repair=True)])
                self.assertIsNotNone(y)
                self.assertAlmostEqual(len(y) / len(x), 1, delta=0.02)

    def test_a_refused_text_is_none_the_rest_speak(self):
        v = INSTALLED[0]
        outs = V.synthesize_many(["good morning", "   ", ".", 'say "quoted" \\ words', "good night"], v, [V.Knobs()] * 5)
        self.assertIsNotNone(outs[0])
        self.assertIsNone(outs[1])
        self.assertIsNotNone(outs[3])
        self.assertIsNotNone(outs[4])

    def test_a_crash_loses_only_its_own_text(self):
        # festival dies (SIGSEGV) after writing the first output: the second text is dropped
        # as the one it died on, the third runs again and every output matches its text
        real = subprocess.run
        calls = []

        def dying(cmd, **kw):
            calls.append(cmd)
            r = real(cmd, **kw)
            if len(calls) == 2:  # the first synthesis run
                d = kw["cwd"]
                for f in sorted(os.listdir(d))[1:]:
                    if f.endswith(".wav"):
                        os.remove(os.path.join(d, f))
                return subprocess.CompletedProcess(cmd, -11, r.stdout, r.stderr)
            return r

        texts = ["good morning", "a much longer sentence than the others, said slowly", "hi"]
        with mock.patch.object(subprocess, "run", dying):
            outs = V.synthesize_many(texts, INSTALLED[0], [V.Knobs()] * 3)
        self.assertIsNotNone(outs[0])
        self.assertIsNone(outs[1])
        self.assertIsNotNone(outs[2])
        self.assertGreater(len(outs[0]), len(outs[2]))  # each output is its own text's


@unittest.skipUnless(all(v in INSTALLED for v in map(V.voice, B.ACCENTED_WEIGHTS)), "accented voices needed")
class AccentedBuildTest(unittest.TestCase):
    def test_voice_set(self):
        out = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, out)
        with mock.patch.object(T, "load_pool", lambda *a, **k: small_pool()):
            a = B.parser().parse_args(["--out", out, "--voice-set", "accented", "--holdout-person", "mv",
                                       "--train", "10", "--val", "2", "--test", "4", "--speakers", "4",
                                       "--heldout-speakers", "2", "--heldout-person-variants", "1",
                                       "--shard-size", "5", "--jobs", "1", "--seed", "3"])
            recipe = B.build(a, log=io.StringIO())
            self.assertEqual(recipe["counts"]["train"], 10 - recipe["refused"]["train"])
            rows = {s: [json.loads(l) for l in open(os.path.join(out, f"{s}.jsonl"))] for s in B.SPLITS}
            accented = set(B.ACCENTED_WEIGHTS)
            self.assertTrue(rows["train"])
            for r in rows["train"] + rows["val"] + rows["test-speakers"]:
                self.assertIn(r["voice"], accented)
                self.assertNotEqual(r["person"], "mv")
            self.assertTrue(rows["test-voice"])
            self.assertTrue(all(r["person"] == "mv" for r in rows["test-voice"]))
            self.assertEqual(rows["test-espeak"], [])
            # --accent-repair: in every item (so in the shards' plan hashes) and each row's knobs
            plan_plain, spk, _ = B.plan(a)
            a.accent_repair = True
            plan_rep, _, _ = B.plan(a)
            spk = {k: sp.to_dict() for k, sp in spk.items()}
            self.assertTrue(all(it.get("repair") for its in plan_rep.values() for it in its))
            self.assertFalse(any("repair" in it for its in plan_plain.values() for it in its))
            self.assertNotEqual(B.plan_hash(plan_rep["train"][:5], spk), B.plan_hash(plan_plain["train"][:5], spk))
            a.accent_repair = False
            self.assertTrue(all("repair" not in r["knobs"] for r in rows["train"]))
            self.assertEqual(B.main(["--out", out, "--accent-repair", "--train", "1"]), 2)  # the human set
            # a synthesiser that fails as a whole (a diphone scan festival stopped) is an error
            # message and exit status 1, not a traceback
            out2 = tempfile.mkdtemp()
            self.addCleanup(shutil.rmtree, out2)
            err = io.StringIO()
            with mock.patch.object(V, "synthesize_many", side_effect=V.SynthError("festival x: the diphone scan stopped")), \
                    mock.patch("sys.stderr", err):
                self.assertEqual(B.main(["--out", out2, "--voice-set", "accented", "--holdout-person", "mv", "--train", "4",
                                         "--val", "0", "--test", "0", "--speakers", "2", "--heldout-speakers", "1",
                                         "--heldout-person-variants", "0", "--jobs", "1", "--accent-repair"]), 1)
            self.assertIn("error: festival x: the diphone scan stopped", err.getvalue())
            a.holdout_person = "rms"  # not in this set: named, before any work
            with self.assertRaisesRegex(B.CorpusError, "no voice of that person in the accented set"):
                B.build(a, log=io.StringIO())


if __name__ == "__main__":
    unittest.main()
