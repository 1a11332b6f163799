import unittest

from train.chattts.clone_cer import pick_clips, ratio_interval


class CloneCERTest(unittest.TestCase):
    def test_pick_clips(self):
        adapt = [{"speaker": "a", "seconds": 2.5}, {"speaker": "b", "seconds": 7.0}, {"speaker": "a", "seconds": 3.2, "n": 1},
                 {"speaker": "a", "seconds": 4.0, "n": 2}, {"speaker": "b", "seconds": 6.0, "n": 3},
                 {"speaker": "c", "seconds": 12.0}, {"speaker": "c", "seconds": 2.0}]
        got = pick_clips(adapt)
        self.assertEqual(got["a"], [adapt[2]])  # the first of 3-4.5 s
        self.assertEqual(got["b"], [adapt[4]])  # none of 3-4.5 s: the shortest up to 10 s
        self.assertNotIn("c", got)  # 12 s is too long, 2 s too short, and nothing to join it with
        short = [{"speaker": "d", "seconds": 1.0, "n": 1}, {"speaker": "d", "seconds": 1.5, "n": 2},
                 {"speaker": "d", "seconds": 0.8, "n": 3}, {"speaker": "d", "seconds": 2.0, "n": 4}]
        self.assertEqual([r["n"] for r in pick_clips(short)["d"]], [1, 2, 3])  # 3.3 s together

    def test_ratio_interval(self):
        self.assertEqual(ratio_interval([(4, 2), (2, 1), (6, 3)]), [2.0, 2.0])
        lo, hi = ratio_interval([(10, 1), (0, 5), (3, 3), (1, 4)], n=500)
        self.assertLess(lo, 14 / 13)
        self.assertGreater(hi, 14 / 13)
        self.assertEqual(ratio_interval([]), [0.0, 0.0])


if __name__ == "__main__":
    unittest.main()


class TranscribeOneFileTest(unittest.TestCase):
    """parley transcribe leaves "file" out of its JSON when given one file; the evaluation's
    reader must still pair the text with it (clone_cer --per-speaker 1 crashed on KeyError)."""

    def test_single_file_without_name(self):
        import os
        import stat
        import tempfile

        from train.chattts.evaluate import transcribe

        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "parley")
            with open(fake, "w") as f:
                f.write('#!/bin/sh\necho \'{"text": "hello there", "language": "en"}\'\n')
            os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
            self.assertEqual(transcribe(["a.wav"], fake, "model"), ["hello there"])
