"""English spoken by festival's other-language voices: more real people, with accents.

Debian's main archive has only four English voices made from real people (kal, ked, slt, awb,
plus rms held out), all adults and one of them a woman.  It has more people in other languages'
festival voices: Czech (dita, a woman; machac and ph, men) and Finnish (lj, a woman; mv, a man),
diphone databases cut from their recordings.  (Its Italian voices and the Czech boy krb are
left out: PocketSphinx heard them at 97 % WER.)
Those voices cannot read English text, but they can say English phones: festival's English
front end (kal_diphone's: lexicon, letter-to-sound, phrasing, durations, intonation) turns the
text into phones with durations and F0 targets, each phone is mapped to the nearest phone of
the voice's language (``MAPS``), and the voice's diphones are joined on that plan (festival's
``Segments`` utterance).  The result is English as a Czech or Finnish speaker with a strong
accent says it, in that speaker's own voice source: what a recogniser for real people needs
more of (women, accents), with the transcript still exact.

    voice = ACCENTED["festival:czech_dita"]
    x = synthesize_accented(["hello there"], voice, [Knobs(f0=220)])[0]

Phones a language lacks (English th, schwa, w in Czech) take the nearest one the voice
recorded (``missing_diphones`` finds the gaps); a diphthong becomes two phones.  ``python3 -m train.corpus.accent --voice ID --text T --out W``
writes one file for listening.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import voices as V

# radio phones (kal_diphone's US English set) -> the voice language's phones.  A tuple is said
# as a sequence (plan() splits the duration); an empty one drops the phone.
MAPS: Dict[str, Dict[str, Tuple[str, ...]]] = {
    "cs": {
        "aa": ("a:",), "ae": ("e",), "ah": ("a",), "ao": ("o:",), "aw": ("a", "u"), "ay": ("a", "j"),
        "ax": ("e",), "eh": ("e",), "er": ("e", "r"), "ey": ("e", "j"), "ih": ("i",), "iy": ("i:",),
        "ow": ("o", "u"), "oy": ("o", "j"), "uh": ("u",), "uw": ("u:",),
        "b": ("b",), "ch": ("c~",), "d": ("d",), "dh": ("d",), "f": ("f",), "g": ("g",), "hh": ("h",),
        "jh": ("dz~",), "k": ("k",), "l": ("l",), "m": ("m",), "n": ("n",), "ng": ("n",), "p": ("p",),
        "r": ("r",), "s": ("s",), "sh": ("s~",), "t": ("t",), "th": ("t",), "v": ("v",), "w": ("v",),
        "y": ("j",), "z": ("z",), "zh": ("z~",), "pau": ("#",),
    },
    "fi": {  # what both Finnish voices have diphones for (lj lacks S, N and w beside vowels)
        "aa": ("a",), "ae": ("@",), "ah": ("a",), "ao": ("o",), "aw": ("a", "u"), "ay": ("a", "i"),
        "ax": ("e",), "eh": ("e",), "er": ("e", "r"), "ey": ("e", "i"), "ih": ("i",), "iy": ("i:",),
        "ow": ("o", "u"), "oy": ("o", "i"), "uh": ("u",), "uw": ("u:",),
        "b": ("b",), "ch": ("t", "s"), "d": ("d",), "dh": ("d",), "f": ("f",), "g": ("g",), "hh": ("h",),
        "jh": ("d", "s"), "k": ("k",), "l": ("l",), "m": ("m",), "n": ("n",), "ng": ("n",), "p": ("p",),
        "r": ("r",), "s": ("s",), "sh": ("s",), "t": ("t",), "th": ("t",), "v": ("v",), "w": ("v",),
        "y": ("j",), "z": ("s",), "zh": ("s",), "pau": ("#",),
    },
}


# Phones a voice has beyond its language's map (mv recorded the loan-word phones).
OVERRIDES: Dict[str, Dict[str, Tuple[str, ...]]] = {
    "hy_fi_mv_diphone": {"ch": ("t", "S"), "jh": ("d", "S"), "ng": ("N",), "sh": ("S",), "th": ("T",), "w": ("w",),
                         "zh": ("S",)},
}


def phone_map(v: V.Voice) -> Dict[str, Tuple[str, ...]]:
    """radio phone -> the phones v says for it."""
    if v.lang not in MAPS:
        raise ValueError(f"voice {v.id}: no phone map for language {v.lang!r}")
    return {**MAPS[v.lang], **OVERRIDES.get(v.name, {})}


def _accented(name: str, person: str, package: str, sex: str, f0: float, lang: str, voice_dir: str) -> V.Voice:
    return V.Voice(f"festival:{name}", "festival", name, person, package, sex, f0, True, lang, voice_dir)


ACCENTED: Dict[str, V.Voice] = {v.id: v for v in [
    _accented("czech_dita", "dita", "festvox-czech-dita", "f", 200, "cs", "czech/czech_dita"),
    _accented("czech_machac", "machac", "festvox-czech-machac", "m", 110, "cs", "czech/czech_machac"),
    _accented("czech_ph", "ph", "festvox-czech-ph", "m", 110, "cs", "czech/czech_ph"),
    _accented("suo_fi_lj_diphone", "lj", "festvox-suopuhe-lj", "f", 190, "fi", "finnish/suo_fi_lj_diphone"),
    _accented("hy_fi_mv_diphone", "mv", "festvox-suopuhe-mv", "m", 105, "fi", "finnish/hy_fi_mv_diphone"),
]}

# The English front end's own typical F0 (kal_diphone), which the targets are moved from.
FRONT_F0 = 105.0

_ANALYSE = """(voice_kal_diphone)
(define (parley_front utt)
  ;; festival's Text utterance type without Wave_Synth: phones, durations and targets only
  (Initialize utt) (Text utt) (Token_POS utt) (Token utt) (POS utt) (Phrasify utt) (Word utt)
  (Pauses utt) (Intonation utt) (PostLex utt) (Duration utt) (Int_Targets utt)
  utt)
(define (parley_dump utt path)
  (let ((fd (fopen path "w")))
    (mapcar (lambda (s)
       (format fd "%s %f" (item.name s) (item.feat s "end"))
       (mapcar (lambda (tg) (format fd " %f:%f" (item.feat tg "pos") (item.feat tg "f0")))
               (if (item.relation s 'Target) (item.daughters (item.relation s 'Target)) nil))
       (format fd "\\n"))
     (utt.relation.items utt 'Segment))
    (format fd "==\\n")
    (fclose fd)))
"""


def _parse_segments(text: str) -> Optional[List[Tuple[str, float, List[Tuple[float, float]]]]]:
    """One dump (phone, end time, pos:f0 targets per line, "==" last) -> segments, or None if
    it is incomplete or unreadable."""
    lines = text.splitlines()
    if not lines or lines[-1] != "==":
        return None
    segs, prev_end = [], 0.0
    for line in lines[:-1]:
        parts = line.split()
        try:
            end = float(parts[1])
            targets = [tuple(float(x) for x in p.split(":")) for p in parts[2:]]
        except (ValueError, IndexError):
            return None
        if any(len(t) != 2 for t in targets):
            return None
        segs.append((parts[0], max(0.0, end - prev_end), [(pos - prev_end, f0) for pos, f0 in targets]))
        prev_end = end
    return segs or None


def analyse(texts: Sequence[str], stretches: Sequence[float], tmpdir: Optional[str] = None,
            timeout: float = 600) -> List[Optional[List[Tuple[str, float, List[Tuple[float, float]]]]]]:
    """English phones for each text: [(phone, duration s, [(time in phone s, f0 Hz)])], or None
    where festival's front end failed on that text (or it is empty)."""
    out: List[Optional[list]] = [None] * len(texts)
    pending = [(i, t) for i, t in enumerate(texts) if t.strip()]
    with tempfile.TemporaryDirectory(dir=tmpdir) as d:
        paths = [os.path.join(d, f"{i:05d}.seg") for i in range(len(texts))]

        def script(items) -> str:
            lines = [_ANALYSE]
            for i, t in items:
                lines.append(f"(Parameter.set 'Duration_Stretch {stretches[i]:.4f})")
                lines.append(f"(unwind-protect (parley_dump (parley_front (Utterance Text {V._scheme_string(t)})) "
                             f"{V._scheme_string(paths[i])}) nil)")
            return "\n".join(lines) + "\n"

        def done(i: int) -> bool:
            if not os.path.exists(paths[i]):
                return False
            with open(paths[i], encoding="utf-8", errors="replace") as f:
                out[i] = _parse_segments(f.read())
            return True

        V.run_festival(pending, script, done, "festival's English front end", timeout, d)
    return out


def plan(segs, table: Dict[str, Tuple[str, ...]], f0: float, f0_range: float,
         lang: str = "") -> List[Tuple[str, float, List[Tuple[float, float]]]]:
    """Map English segments to a voice's phones (``phone_map``), moving the F0 targets to
    mean f0.  A phone said as several shares its time equally, the first taking the remainder."""
    scale = f0 / FRONT_F0
    out: list = []
    carry, carried = 0.0, []  # a phone the language drops gives its time and targets to the next
    for name, dur, targets in segs:
        phones = table.get(name)
        if phones is None:
            raise V.SynthError(f"no {lang or 'voice'} phone for English phone {name!r}")
        tg = carried + [(carry + t, max(40.0, f0 + (hz - FRONT_F0) * scale * f0_range)) for t, hz in targets]
        if not phones:
            carry, carried = carry + dur, tg
            continue
        dur += carry
        carry, carried = 0.0, []
        n = len(phones)
        # the first of several phones is a little longer (a diphthong's onset): 0.6 of two
        parts = [dur * 0.6, dur * 0.4] if n == 2 else [dur / n] * n
        start = 0.0
        for k, (ph, d) in enumerate(zip(phones, parts)):
            last = k == n - 1
            mine = [(max(0.0, t - start), hz) for t, hz in tg
                    if (k == 0 or t >= start) and (last or t < start + d)]
            out.append((ph, d, mine))
            start += d
    if out and (carry or carried):  # a dropped phone at the end: the last phone takes it
        ph, d, tg = out[-1]
        out[-1] = (ph, d + carry, tg + [(d + t, hz) for t, hz in carried])
    return out


def segments_scheme(segs) -> str:
    items = []
    for ph, dur, tg in segs:
        t = " ".join(f"({max(0.0, min(x, dur)):.4f} {hz:.1f})" for x, hz in tg)
        items.append(f"({ph} {dur:.4f} {t})" if t else f"({ph} {dur:.4f})")
    return "(Utterance Segments (" + " ".join(items) + "))"


def synthesize_accented(texts: Sequence[str], v: V.Voice, knobs: Sequence[V.Knobs], tmpdir: Optional[str] = None,
                        timeout: float = 600) -> List[Optional[np.ndarray]]:
    """Many texts in one accented voice (two festival runs); None where a text was refused."""
    table = phone_map(v)
    if len(knobs) != len(texts):
        raise ValueError("one Knobs per text")
    V.check(v)
    V.check(V.VOICES["festival:kal_diphone"])  # the English front end
    texts = [" ".join(t.split()) for t in texts]
    segs = analyse(texts, [k.stretch for k in knobs], tmpdir, timeout)
    pending = []
    for i, (s, k) in enumerate(zip(segs, knobs)):
        if s is None:
            continue
        try:
            pending.append((i, segments_scheme(plan(s, table, k.f0 if k.f0 is not None else v.f0, k.f0_range, v.lang))))
        except V.SynthError:
            pass
    def script(items, paths) -> str:
        lines = [f"(voice_{v.name})"]
        for i, utt in items:
            lines.append(f"(unwind-protect (utt.save.wave (utt.synth {utt}) {V._scheme_string(paths[i])} 'riff) nil)")
        return "\n".join(lines) + "\n"

    return V.festival_wavs(len(texts), pending, script, f"festival {v.name}", timeout, tmpdir)


def missing_diphones(v: V.Voice, contexts: Sequence[str] = ("#", "a", "i", "t")) -> List[str]:
    """The diphones v lacks among its mapped phones beside each context phone (festival says
    "using default diphone #-# for X-Y" and plays silence there): empty for a usable map."""
    V.check(v)
    phones = sorted({p for ps in phone_map(v).values() for p in ps} - {"#"})
    lines = [f"(voice_{v.name})"]
    for x in phones:
        for c in contexts:
            # (UniSyn dies on an utterance without F0 targets)
            lines.append(f"(unwind-protect (utt.synth (Utterance Segments ((# 0.1) ({c} 0.1 (0 {v.f0:.0f})) "
                         f"({x} 0.1 (0 {v.f0:.0f})) ({c} 0.1 (0 {v.f0:.0f})) (# 0.1)))) nil)")
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "scan.scm")
        with open(script, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run(["festival", "-b", script], capture_output=True, text=True, timeout=300, cwd=d)
    return sorted(set(re.findall(r"default diphone \S+ for (\S+)", r.stdout + r.stderr)))


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.corpus.accent", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--voice", required=True, choices=sorted(ACCENTED))
    ap.add_argument("--text", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--f0", type=float, default=None)
    a = ap.parse_args(argv)
    import soundfile as sf
    v = ACCENTED[a.voice]
    x = synthesize_accented([a.text], v, [V.Knobs(f0=a.f0)])[0]
    if x is None:
        print(f"error: {v.id} could not say {a.text!r}", file=sys.stderr)
        return 1
    sf.write(a.out, x, V.SR)
    return 0


if __name__ == "__main__":
    sys.exit(main())
