import os
import tempfile
import unittest
from unittest import mock

from train.corpus import text as T
from train.sensevoice import lexicon


class LexiconTest(unittest.TestCase):
    def test_words_are_lower_cased_letters_with_inner_apostrophes(self):
        got = lexicon.words_of(["Hello world's end", "don't 'quoted' x-ray 42 café it''s o'", "  HELLO\tagain\n"])
        self.assertEqual(got, {"hello", "world's", "end", "don't", "again"})

    def test_dictionary_words_read_every_list_of_the_package(self):
        with tempfile.TemporaryDirectory() as d:
            dict_dir = os.path.join(d, "usr", "share", "dict")
            os.makedirs(dict_dir)
            with open(os.path.join(dict_dir, "american-english-large"), "w") as f:
                f.write("Aachen\naardvark's\nzebra\n\nSão\n")
            os.symlink("american-english-large", os.path.join(dict_dir, "words"))
            with mock.patch.object(T, "fetch_deb", return_value=d) as fetch:
                got = lexicon.dictionary_words("wamerican-large=1")
            fetch.assert_called_once()
            self.assertEqual(got, {"aachen", "aardvark's", "zebra"})
            os.remove(os.path.join(dict_dir, "words"))
            os.remove(os.path.join(dict_dir, "american-english-large"))
            with mock.patch.object(T, "fetch_deb", return_value=d), self.assertRaises(T.TextSourceMissing):
                lexicon.dictionary_words("wamerican-large=1")

    def test_main_writes_the_union_sorted_without_held_out_text(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "lm.words.txt")
            with mock.patch.object(lexicon, "dictionary_words", return_value={"zebra", "apple"}), \
                    mock.patch.object(T, "load_pool", return_value=None), \
                    mock.patch.object(lexicon, "sentences", return_value=["the quick fox", "Apple pie"]), \
                    mock.patch.object(T, "lm_sentences", return_value=["spam e-mail words"]), mock.patch("sys.stdout"):
                self.assertEqual(lexicon.main(["--out", out, "--extra", "emails"]), 0)
            with open(out) as f:
                self.assertEqual(f.read(), "apple\nfox\npie\nquick\nspam\nthe\nwords\nzebra\n")
            with mock.patch("sys.stderr"), self.assertRaises(SystemExit):
                lexicon.main(["--out", out, "--extra", "novels"])


if __name__ == "__main__":
    unittest.main()
