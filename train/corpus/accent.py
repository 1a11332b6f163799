"""English spoken by festival's other-language voices: more real people, with accents.

Debian's main archive has only four English voices made from real people (kal, ked, slt, awb,
plus rms held out), all adults and one of them a woman.  It has more people in other languages'
festival voices: Czech (dita, a woman; machac and ph, men) and Finnish (lj, a woman; mv, a man),
diphone databases cut from their recordings.  (Its Italian voices and the Czech boy krb are
left out: PocketSphinx heard them at 97 % WER; so is the Hindi man of festvox-hi-nsk, tried
with a map to his own phones, retroflex t and d and all: 112 %.)
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
recorded (``missing_diphones`` finds the gaps); a diphthong becomes two phones.  Pairs of
phones the voice never recorded side by side play as silence unless ``Knobs.repair`` has
``repair()`` say them as the speaker's language would (Czech voicing assimilation, bridges).
``python3 -m train.corpus.accent --voice ID --text T --out W [--repair]`` writes one file for
listening.
"""
from __future__ import annotations

import argparse
import os
import re
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


# A diphone a voice never recorded plays as silence (festival's default #-#): Czech has no
# voiced obstruent before a voiceless one or a pause, no vowel hiatus; lj no final consonants
# and no doubled ones.  A speaker of the language says such a pair in their own way, and so
# does repair(): Czech voicing assimilation (the first of two obstruents takes the second's
# voicing; a final one is voiceless; the partners are Czech's own, festival's czech.scm), a
# doubled phone said once and long, and else a short bridge the voice has both diphones for:
# a j after a front vowel (Czech), an i after a final consonant (Finnish loan words: "bussi"),
# or a 30 ms pause (where a speaker would break the two apart, as with a glottal stop).
VOICING: Dict[str, Dict[str, str]] = {
    "cs": {a: b for x, y in [("b", "p"), ("d", "t"), ("d~", "t~"), ("g", "k"), ("z", "s"), ("z~", "s~"),
                             ("v", "f"), ("h", "ch"), ("dz", "c"), ("dz~", "c~")] for a, b in [(x, y), (y, x)]},
}
BRIDGES: Dict[str, List[Tuple[str, str]]] = {  # (after what, bridge) in order of preference
    "cs": [("front", "j"), ("any", "#")],
    "fi": [("final", "i"), ("any", "#")],
}
BRIDGE_S = {"#": 0.03, "j": 0.04, "i": 0.05}  # how long a bridge is (taken from the phone before)
FRONT = ("i", "i:", "e", "e:")


def _bridge_fits(where: str, left: str, right: str) -> bool:
    if where == "front":
        return left in FRONT
    if where == "final":
        return right == "#" and left[0] not in "aeiou@"
    return True


Segment = Tuple[str, float, List[Tuple[float, float]]]


def repair(segs: Sequence[Segment], have: frozenset, lang: str) -> List[Segment]:
    """Plan segments (plan()) with each pair the voice lacks (``have``: its recorded diphones as
    (left, right) pairs) said as a speaker of lang would; pairs nothing here mends stay.  (One
    pass from the left: a cluster whose voicing needs two changes, as in "dogs", keeps a gap.)"""
    out: List[Segment] = []
    for ph, dur, tg in segs:
        if out and (out[-1][0], ph) not in have:
            prev, pdur, ptg = out[-1]
            before = out[-2][0] if len(out) > 1 else None
            alt = VOICING.get(lang, {}).get(prev)
            if alt == ph and (alt, ph) not in have:  # "good time" in a voice without t-t: one long t
                prev = alt
            if prev == ph:  # one long phone
                out[-1] = (ph, pdur + dur, ptg + [(pdur + t, hz) for t, hz in tg])
                continue
            if alt and (alt, ph) in have and (before is None or (before, alt) in have):
                out[-1] = (alt, pdur, ptg)
            else:
                for where, b in BRIDGES.get(lang, []):
                    if _bridge_fits(where, prev, ph) and (prev, b) in have and (b, ph) in have:
                        bd = min(BRIDGE_S.get(b, 0.03), pdur / 2)
                        cut = pdur - bd
                        out[-1] = (prev, cut, [(t, hz) for t, hz in ptg if t < cut])
                        out.append((b, bd, [(t - cut, hz) for t, hz in ptg if t >= cut]))
                        break
        out.append((ph, dur, tg))
    return out


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
    have = recorded_diphones(v) if any(k.repair for k in knobs) else frozenset()
    pending = []
    for i, (s, k) in enumerate(zip(segs, knobs)):
        if s is None:
            continue
        try:
            segs_v = plan(s, table, k.f0 if k.f0 is not None else v.f0, k.f0_range, v.lang)
            if k.repair:
                segs_v = repair(segs_v, have, v.lang)
            pending.append((i, segments_scheme(segs_v)))
        except V.SynthError:
            pass
    def script(items, paths) -> str:
        lines = [f"(voice_{v.name})"]
        for i, utt in items:
            lines.append(f"(unwind-protect (utt.save.wave (utt.synth {utt}) {V._scheme_string(paths[i])} 'riff) nil)")
        return "\n".join(lines) + "\n"

    return V.festival_wavs(len(texts), pending, script, f"festival {v.name}", timeout, tmpdir)


def _phones(v: V.Voice) -> List[str]:
    """Every phone v may say: its map's, their voicing partners and the bridges."""
    ps = {p for said in phone_map(v).values() for p in said}
    ps |= {VOICING.get(v.lang, {}).get(p) for p in ps} - {None}
    ps |= {b for _, b in BRIDGES.get(v.lang, [])}
    return sorted(ps | {"#"})


def missing_diphones(v: V.Voice, contexts: Sequence[str] = ("#", "a", "i", "t")) -> List[str]:
    """The diphones ("X-Y") v lacks among its mapped phones beside each context phone (one of
    its phones; festival plays silence there): empty for a usable map."""
    have = recorded_diphones(v)
    phones = {p for ps in phone_map(v).values() for p in ps} - {"#"}
    return sorted({f"{a}-{b}" for x in phones for c in contexts for a, b in ((c, x), (x, c)) if (a, b) not in have})


_RECORDED: Dict[Tuple[str, Tuple[str, ...]], frozenset] = {}


def recorded_diphones(v: V.Voice) -> frozenset:
    """Every (left, right) pair of v's phones (``_phones``) it has a diphone for, from what
    festival reports missing ("using default diphone #-# for X-Y") while saying "# x a x b x c
    ... x #" for each phone x; one festival run per voice and phone set in a process (a failed
    scan raises SynthError and is not kept)."""
    ps = tuple(_phones(v))
    key = (v.name, ps)
    if key in _RECORDED:
        return _RECORDED[key]
    V.check(v)
    lines = [f"(voice_{v.name})"]
    for i, x in enumerate(ps):
        seq = ["#"] + [q for p in ps for q in (x, p)] + [x, "#"]
        # (UniSyn dies on an utterance without F0 targets)
        lines.append("(unwind-protect (utt.synth (Utterance Segments (" +
                     " ".join(f"({p} 0.08 (0 {v.f0:.0f}))" for p in seq) + "))) nil)")
        lines.append(f'(format t "parley-scan {i}\\n")')
    with tempfile.TemporaryDirectory() as d:
        r = V.festival_batch("\n".join(lines) + "\n", d, 300, f"{v.name}'s diphone scan")
    # festival exits with a crash after these voices even when all went well: count the marks
    done = len(set(re.findall(r"parley-scan (\d+)", r.stdout)))
    if done != len(ps):
        raise V.SynthError(f"festival {v.name}: the diphone scan stopped after {done} of {len(ps)} "
                           f"utterances (exit {r.returncode}): {r.stderr.strip()[-200:]}")
    lack = set(re.findall(r"default diphone \S+ for (\S+)", r.stdout + r.stderr))
    _RECORDED[key] = frozenset((x, y) for x in ps for y in ps if f"{x}-{y}" not in lack)
    return _RECORDED[key]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.corpus.accent", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--voice", required=True, choices=sorted(ACCENTED))
    ap.add_argument("--text", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--f0", type=float, default=None)
    ap.add_argument("--repair", action="store_true", help="say the diphones the voice lacks as its speakers would")
    a = ap.parse_args(argv)
    import soundfile as sf
    v = ACCENTED[a.voice]
    x = synthesize_accented([a.text], v, [V.Knobs(f0=a.f0, repair=a.repair)])[0]
    if x is None:
        print(f"error: {v.id} could not say {a.text!r}", file=sys.stderr)
        return 1
    sf.write(a.out, x, V.SR)
    return 0


if __name__ == "__main__":
    sys.exit(main())
