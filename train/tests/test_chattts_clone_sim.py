"""clone_cer's speaker-similarity section with a stubbed encoder (no parley, no model)."""
import unittest

from train.chattts.clone_cer import similarity_summary, speaker_similarity

# sim(ref, take) is looked up by take: each file's similarity to the reference
SIMS = {"c0": 0.6, "c1": 0.4,  # clone: mean 0.5
        "s1a": 0.2, "s1b": 0.4,  # seed 1: 0.3
        "s2a": 0.45, "s2b": 0.45,  # seed 2: 0.45 (the max)
        "s3a": 0.1, "s3b": 0.1,  # seed 3: 0.1
        "t0": 0.3, "o0": 0.9, "o1": 0.7}


def stub(ref, take):
    assert ref == "clip.wav", ref
    return SIMS[take]


SEEDS = {1: ["s1a", "s1b"], 2: ["s2a", "s2b"], 3: ["s3a", "s3b"]}


class CloneSimilarityTest(unittest.TestCase):
    def test_speaker_row(self):
        r = speaker_similarity(stub, "clip.wav", ["c0", "c1"], SEEDS, ["t0"], ["o0", "o1"])
        self.assertAlmostEqual(r["clone"], 0.5)
        self.assertAlmostEqual(r["seed_max"], 0.45)
        self.assertEqual(r["seed_max_seed"], 2)
        self.assertAlmostEqual(r["seed_median"], 0.3)
        self.assertEqual(r["seeds"], {"1": 0.3, "2": 0.45, "3": 0.1})
        self.assertTrue(r["clone_beats_every_seed"])
        self.assertTrue(r["clone_beats_median_seed"])
        self.assertAlmostEqual(r["clone_minus_seed_max"], 0.05)
        self.assertEqual(r["seeds_at_or_above_clone"], 0)
        self.assertAlmostEqual(r["same_text_seed_voice"], 0.3)
        self.assertAlmostEqual(r["self"], 0.8)
        self.assertNotIn("clone_seed", r)
        based = speaker_similarity(stub, "clip.wav", ["c0", "c1"], SEEDS, base=2)
        self.assertEqual(based["clone_seed"], 2)
        self.assertTrue(based["clone_beats_its_seed"])
        self.assertNotIn("clone_beats_its_seed", speaker_similarity(stub, "clip.wav", ["c0"], SEEDS, base=9))  # not among them

    def test_clone_below_a_seed(self):
        # a clone of 0.35 beats the median (0.3) but not seed 2 (0.45); a tie with the max is no win
        r = speaker_similarity(stub, "clip.wav", ["c1", "s1a", "s2a"], SEEDS)
        self.assertAlmostEqual(r["clone"], (0.4 + 0.2 + 0.45) / 3)
        self.assertFalse(r["clone_beats_every_seed"])
        self.assertTrue(r["clone_beats_median_seed"])
        self.assertEqual(r["seeds_at_or_above_clone"], 1)
        self.assertNotIn("self", r)
        tie = speaker_similarity(stub, "clip.wav", ["s2a"], SEEDS)
        self.assertFalse(tie["clone_beats_every_seed"])
        self.assertEqual(tie["seeds_at_or_above_clone"], 1)

    def test_summary(self):
        win = speaker_similarity(stub, "clip.wav", ["c0", "c1"], SEEDS, own=["o0"], base=1)
        lose = speaker_similarity(stub, "clip.wav", ["s3a"], SEEDS, own=["o1"], base=1)
        mid = speaker_similarity(stub, "clip.wav", ["s1b"], SEEDS)  # 0.4: above the median, below seed 2
        lose["other_variants_max"] = 0.6
        got = similarity_summary({"a": win, "b": lose, "c": mid, "none": {"clone": None}})
        self.assertEqual(got["speakers"], 3)
        self.assertEqual(got["clone_beats_every_seed"], 1)
        self.assertEqual(got["clone_beats_every_seed_of"], "1 of 3")
        self.assertEqual(got["clone_beats_median_seed"], 2)
        self.assertAlmostEqual(got["clone_mean"], (0.5 + 0.1 + 0.4) / 3, places=4)
        self.assertAlmostEqual(got["seed_max_mean"], 0.45)
        self.assertAlmostEqual(got["self_mean"], 0.8)  # the two that have it
        self.assertAlmostEqual(got["other_variants_max_mean"], 0.6)
        self.assertEqual(got["seed_max_seeds"], {"2": 3})
        self.assertEqual(got["clone_beats_its_seed_of"], "1 of 2")  # 0.5 > 0.3, 0.1 < 0.3
        self.assertEqual(similarity_summary({})["speakers"], 0)


if __name__ == "__main__":
    unittest.main()
