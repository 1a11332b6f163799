"""The word list beside the recogniser's token language model (lm.words.txt beside lm.bin).

    /usr/bin/python3 -m train.sensevoice.lexicon --out assets/demo/sensevoice/lm.words.txt

A token LM knows which pieces follow which, not which words exist, so the beam search
(asr/beam.go) lets a near miss that spells no word ("glassure" for "glacier") win on its
acoustics. With a word list and a charge per word it lacks (lm.json's ``oov``, chosen by
train.sensevoice.lmtune) a real word the acoustics allow wins instead.

The list is general English and the LM's own text: Debian's SCOWL word list (``--dictionary``,
a package fetched with apt-get download, not installed; wamerican-large by default: 166,083
words of letters and apostrophes), the words of every sentence the token LM learns from (train.sensevoice.lm.sentences:
the corpus's training text sets and drawn assistant sentences, commands and words) and of the
e-mail prose it adds (``--extra``). No held-out sentence is read: a word of the test text is
listed only when the dictionary or the training text has it. Words are lower-cased and kept
when they are spelt with the pieces' letters and apostrophes alone; one a line, sorted.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from typing import Iterable, List, Optional, Set

from ..corpus import text as T
from .lm import sentences

DICTIONARY = "wamerican-large=2020.12.07-2"
WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")


def words_of(lines: Iterable[str]) -> Set[str]:
    """The words of lines (split on white space), lower-cased, that are letters with inner apostrophes."""
    out = set()
    for line in lines:
        for w in line.lower().split():
            if WORD.fullmatch(w):
                out.add(w)
    return out


def dictionary_words(spec: str, cache: Optional[str] = None) -> Set[str]:
    """The words of a Debian word-list package's /usr/share/dict files (NAME=VERSION)."""
    root = T.fetch_deb(spec, cache)
    files = sorted(f for f in glob.glob(os.path.join(root, "usr", "share", "dict", "*")) if os.path.isfile(f)
                   and not os.path.islink(f))
    if not files:
        raise T.TextSourceMissing(f"Debian package {spec}: no word list under usr/share/dict")
    out = set()
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            out |= words_of(fh)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.lexicon", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dictionary", default=DICTIONARY, help="a Debian word-list package NAME=VERSION, or none")
    ap.add_argument("--draws", type=int, default=200000, help="as train.sensevoice.lm's --draws")
    ap.add_argument("--seed", type=int, default=3, help="as train.sensevoice.lm's --seed")
    ap.add_argument("--extra", action="append", default=[], metavar="SOURCE",
                    help="an LM-only text source whose words are listed too (train.corpus.text.LM_SOURCES)")
    a = ap.parse_args(argv)
    for name in a.extra:
        if name not in T.LM_SOURCES:
            ap.error(f"--extra {name}: want one of {sorted(T.LM_SOURCES)}")
    counts = {}
    words = set()
    if a.dictionary != "none":
        d = dictionary_words(a.dictionary)
        counts["dictionary"] = len(d)
        words |= d
    pool = T.load_pool(log=sys.stderr)
    t = words_of(sentences(pool, a.draws, a.seed))
    counts["lm text"] = len(t)
    words |= t
    for name in a.extra:
        e = words_of(T.lm_sentences(name))
        counts[name] = len(e)
        words |= e
    if not words:
        print("lexicon: no words", file=sys.stderr)
        return 1
    tmp = a.out + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(w + "\n" for w in sorted(words)))
    os.replace(tmp, a.out)
    print(json.dumps({"words": len(words), "sources": counts, "bytes": os.path.getsize(a.out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
