"""One synthesis interface over espeak-ng, flite and festival.

    voice = VOICES["flite:slt"]
    check(voice)                                   # VoiceMissing names the Debian package
    x = synthesize("hello there", voice, Knobs(f0=180, stretch=1.1))   # 16 kHz float32

The flite and festival voices are made from recordings of real people (CMU ARCTIC and the
CSTR/OGI diphone databases), so their audio carries a human voice source that espeak-ng's
formant synthesis lacks.  ``Voice.person`` names the recorded person: one person may be
behind several voices (kal: flite kal16 and festival kal_diphone; slt: flite slt and festival's
HTS voice), which matters when a person is held out for evaluation.

Knobs are the synthesiser's own controls, so a voice changes the way the engine models it:

- ``f0``: target mean pitch in Hz (flite ``int_f0_target_mean``, festival's ``int_lr_params``;
  espeak-ng's 0-99 pitch scale is mapped from it); ``None`` keeps the voice's own;
- ``f0_range``: the pitch excursion as a factor of the voice's own (intonation width);
- ``stretch``: duration factor (flite ``duration_stretch``, festival ``Duration_Stretch``,
  espeak-ng words per minute), > 1 is slower.

Festival runs once for many texts (``synthesize_many``): starting it costs 0.2 s, more than
most sentences take to speak.  A text a synthesiser refuses raises ``SynthError`` for that
text alone (``synthesize_many`` returns None in its place).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly

SR = 16000


class SynthError(RuntimeError):
    """A synthesiser failed on one text."""


class VoiceMissing(SynthError):
    """A voice (or its engine) is not installed; the message names the package that brings it."""


@dataclass(frozen=True)
class Voice:
    id: str          # engine:name, as recorded per utterance
    engine: str      # espeak-ng | flite | festival
    name: str        # the engine's own voice name
    person: str      # the recorded person behind it ("espeak" for formant synthesis)
    package: str     # the Debian package that installs it
    sex: str         # "m" or "f", the recorded person's
    f0: float        # the voice's own typical mean F0 in Hz (for warping and knobs)
    can_pitch: bool = True  # the engine sets its F0 (else pitch moves only with a resample)
    lang: str = "en"        # the voice's own language; not "en": it says English phones (train.corpus.accent)
    voice_dir: str = ""     # festival: its directory under /usr/share/festival/voices


def _flite(name: str, person: str, sex: str, f0: float) -> Voice:
    return Voice(f"flite:{name}", "flite", name, person, "flite", sex, f0)


def _festival(name: str, person: str, package: str, sex: str, f0: float, can_pitch: bool = True) -> Voice:
    return Voice(f"festival:{name}", "festival", name, person, package, sex, f0, can_pitch)


# The human-derived voices Debian ships for English.
VOICES: Dict[str, Voice] = {v.id: v for v in [
    _flite("kal16", "kal", "m", 105),
    _flite("awb", "awb", "m", 125),
    _flite("rms", "rms", "m", 105),
    _flite("slt", "slt", "f", 175),
    _festival("kal_diphone", "kal", "festvox-kallpc16k", "m", 105),
    _festival("ked_diphone", "ked", "festvox-kdlpc16k", "m", 110),
    _festival("cmu_us_slt_arctic_hts", "slt", "festvox-us-slt-hts", "f", 175, can_pitch=False),
]}


def espeak_voice(name: str) -> Voice:
    """An espeak-ng voice ("en-us", "en-gb+f3", …): formant synthesis, no person behind it."""
    if not re.fullmatch(r"[A-Za-z0-9_\-]+(\+[A-Za-z0-9_\-]+)?", name):
        raise ValueError(f"espeak-ng voice {name!r}: want accent or accent+variant")
    variant = name.split("+")[1] if "+" in name else ""
    female = variant.startswith("f") or variant in {"Annie", "linda", "belinda", "steph", "Alicia", "anika"}
    return Voice(f"espeak-ng:{name}", "espeak-ng", name, "espeak", "espeak-ng", "f" if female else "m",
                 200 if female else 110)


def voice(vid: str) -> Voice:
    """A voice by id: one of VOICES, one of train.corpus.accent's ACCENTED, or espeak-ng:NAME."""
    if vid in VOICES:
        return VOICES[vid]
    if vid.startswith("espeak-ng:"):
        return espeak_voice(vid.split(":", 1)[1])
    from .accent import ACCENTED
    if vid in ACCENTED:
        return ACCENTED[vid]
    raise ValueError(f"unknown voice {vid!r} (known: {', '.join(VOICES)}, {', '.join(ACCENTED)}, espeak-ng:NAME)")


@dataclass(frozen=True)
class Knobs:
    f0: Optional[float] = None
    f0_range: float = 1.0
    stretch: float = 1.0
    # accented voices: the diphones they lack said as their speakers would (train.corpus.accent.repair)
    repair: bool = False

    def to_dict(self) -> dict:
        d = {"f0": None if self.f0 is None else round(float(self.f0), 2),
             "f0_range": round(float(self.f0_range), 3), "stretch": round(float(self.stretch), 3)}
        if self.repair:
            d["repair"] = True
        return d


_FESTIVAL_VOICE_DIRS = {
    "kal_diphone": "english/kal_diphone",
    "ked_diphone": "english/ked_diphone",
    "cmu_us_slt_arctic_hts": "us/cmu_us_slt_arctic_hts",
}
_checked: Dict[str, bool] = {}


def check(v: Voice) -> None:
    """Raise VoiceMissing, naming the voice and the package to install, if v cannot speak."""
    if _checked.get(v.id):
        return
    exe = {"espeak-ng": "espeak-ng", "flite": "flite", "festival": "festival"}[v.engine]
    pkg_line = f"apt-get install {v.package}" + ("" if v.package == exe or v.engine != "festival" else " festival")
    if shutil.which(exe) is None:
        raise VoiceMissing(f"voice {v.id}: {exe} is not installed ({pkg_line})")
    if v.engine == "flite":
        r = subprocess.run(["flite", "-lv"], capture_output=True, text=True, timeout=30)
        if v.name not in r.stdout.split():
            raise VoiceMissing(f"voice {v.id}: flite has no voice {v.name!r} (its voices: {r.stdout.split(':', 1)[-1].strip()}; "
                               f"apt-get install {v.package})")
    elif v.engine == "festival":
        d = _FESTIVAL_VOICE_DIRS.get(v.name) or v.voice_dir or None
        roots = ["/usr/share/festival/voices"]
        if d is None or not any(os.path.isdir(os.path.join(r, d)) for r in roots):
            raise VoiceMissing(f"voice {v.id}: festival voice {v.name} is not installed ({pkg_line})")
    elif v.engine == "espeak-ng":
        r = subprocess.run(["espeak-ng", "-v", v.name, "-q", "x"], capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or "not found" in (r.stderr or "").lower():
            raise VoiceMissing(f"voice {v.id}: espeak-ng has no voice {v.name!r} ({r.stderr.strip()}; apt-get install espeak-ng)")
    _checked[v.id] = True


def _read_16k(path: str, require_audio: bool = True) -> np.ndarray:
    try:
        x, sr = sf.read(path, dtype="float32", always_2d=True)
    except Exception as e:  # noqa: BLE001
        raise SynthError(f"cannot read the synthesiser's output {path}: {e}") from e
    x = x.mean(1)
    if sr != SR:
        g = np.gcd(int(sr), SR)
        x = resample_poly(x, SR // g, int(sr) // g).astype(np.float32)
    if require_audio and (len(x) < SR // 20 or not np.any(x)):
        raise SynthError("the synthesiser produced no audio")
    return np.ascontiguousarray(x, dtype=np.float32)


def _espeak_args(v: Voice, k: Knobs) -> List[str]:
    # espeak-ng: 175 wpm is its normal rate; pitch 0-99 with 50 the voice's own (about +-1 octave)
    rate = int(np.clip(round(175 / k.stretch), 80, 450))
    pitch = 50 if k.f0 is None else int(np.clip(round(50 + 50 * np.log2(k.f0 / v.f0)), 0, 99))
    return ["-v", v.name, "-s", str(rate), "-p", str(pitch)]


def _flite_args(v: Voice, k: Knobs) -> List[str]:
    args = ["-voice", v.name, "--setf", f"duration_stretch={k.stretch:.4f}"]
    if k.f0 is not None:
        args += ["--setf", f"int_f0_target_mean={k.f0:.2f}"]
    # flite's default F0 excursions: about 10 Hz for the diphone voice, 20-30 Hz for the others
    args += ["--setf", f"int_f0_target_stddev={max(2.0, 0.14 * (k.f0 or v.f0) * k.f0_range):.2f}"]
    return args


def _clean_text(text: str) -> str:
    t = " ".join(text.split())
    if not t:
        raise SynthError("empty text")
    return t


def synthesize(text: str, v: Voice, k: Knobs = Knobs(), tmpdir: Optional[str] = None) -> np.ndarray:
    """text -> 16 kHz mono float32.  Raises SynthError (VoiceMissing when not installed)."""
    if v.engine == "festival":
        out = synthesize_many([text], v, [k], tmpdir)[0]
        if out is None:
            raise SynthError(f"festival {v.name} refused {text!r}")
        return out
    check(v)
    text = _clean_text(text)
    if v.engine == "flite":
        return _run_to_16k(v.id, text, lambda path: ["flite", *_flite_args(v, k), "-t", text, "-o", path], tmpdir)
    return _run_to_16k(v.id, text, lambda path: ["espeak-ng", *_espeak_args(v, k), "-w", path, text], tmpdir)


def espeak_wav(text: str, voice: str, rate: int, pitch: int, tmpdir: Optional[str] = None) -> np.ndarray:
    """`espeak-ng -v VOICE -s RATE -p PITCH TEXT` as 16 kHz mono float32, the text as given and
    any length of audio (the espeak-ng corpora's segments, laughs and words).  Raises SynthError."""
    return _run_to_16k(f"espeak-ng -v {voice}", text,
                       lambda path: ["espeak-ng", "-v", voice, "-s", str(rate), "-p", str(pitch), "-w", path, text],
                       tmpdir, require_audio=False)


def _run_to_16k(who: str, text: str, cmd, tmpdir: Optional[str], require_audio: bool = True) -> np.ndarray:
    """Run cmd(wav path) and read what it wrote, resampled to 16 kHz mono."""
    fd, path = tempfile.mkstemp(suffix=".wav", dir=tmpdir)
    os.close(fd)
    try:
        try:
            r = subprocess.run(cmd(path), capture_output=True, timeout=120)
        except subprocess.TimeoutExpired:
            raise SynthError(f"{who} took over 120 s on {text[:60]!r}") from None
        if r.returncode != 0:
            raise SynthError(f"{who} failed on {text[:60]!r}: {r.stderr.decode(errors='replace').strip()[:200]}")
        return _read_16k(path, require_audio)
    finally:
        os.remove(path)


def _scheme_string(text: str) -> str:
    return '"' + text.replace("\\", " ").replace('"', " ") + '"'


def _festival_script(v: Voice, texts: Sequence[str], knobs: Sequence[Knobs], paths: Sequence[str]) -> str:
    lines = [f"(voice_{v.name})"]
    for text, k, path in zip(texts, knobs, paths):
        lines.append(f"(Parameter.set 'Duration_Stretch {k.stretch:.4f})")
        if v.can_pitch:
            f0 = k.f0 if k.f0 is not None else v.f0
            std = max(2.0, 0.2 * f0 * k.f0_range)
            # the diphone voices' linear-regression intonation, retargeted (model_* are theirs)
            lines.append(f"(set! int_lr_params (list (list 'target_f0_mean {f0:.2f}) (list 'target_f0_std {std:.2f}) "
                         f"(list 'model_f0_mean 170) (list 'model_f0_std 34)))")
        lines.append(f"(unwind-protect (utt.save.wave (utt.synth (Utterance Text {_scheme_string(text)})) "
                     f"{_scheme_string(path)} 'riff) nil)")
    return "\n".join(lines) + "\n"


def synthesize_many(texts: Sequence[str], v: Voice, knobs: Sequence[Knobs], tmpdir: Optional[str] = None,
                    timeout: float = 600) -> List[Optional[np.ndarray]]:
    """Many texts in one voice: festival runs once for all of them; the other engines once per
    text.  A refused text gives None in its place (the rest are unaffected)."""
    if len(knobs) != len(texts):
        raise ValueError("one Knobs per text")
    check(v)
    if v.lang != "en":
        from .accent import synthesize_accented
        return synthesize_accented(texts, v, knobs, tmpdir, timeout)
    if v.engine != "festival":
        out: List[Optional[np.ndarray]] = []
        for t, k in zip(texts, knobs):
            try:
                out.append(synthesize(t, v, k, tmpdir))
            except VoiceMissing:
                raise
            except SynthError:
                out.append(None)
        return out
    pending = []
    for i, t in enumerate(texts):
        try:
            pending.append((i, _clean_text(t)))
        except SynthError:
            pass
    return festival_wavs(len(texts), pending,
                         lambda items, paths: _festival_script(v, [t for _, t in items], [knobs[i] for i, _ in items],
                                                               [paths[i] for i, _ in items]),
                         f"festival {v.name}", timeout, tmpdir)


def festival_wavs(n: int, pending: List[tuple], script, who: str, timeout: float,
                  tmpdir: Optional[str] = None) -> List[Optional[np.ndarray]]:
    """Audio for items 0..n-1 from festival: pending [(index, item)] to say, script(items, paths)
    the Scheme that writes item i's WAV to paths[i].  16 kHz audio per index, None where festival
    wrote nothing readable (run_festival: a crash costs only its own item)."""
    out: List[Optional[np.ndarray]] = [None] * n
    with tempfile.TemporaryDirectory(dir=tmpdir) as d:
        paths = [os.path.join(d, f"{i:05d}.wav") for i in range(n)]

        def done(i: int) -> bool:
            if not os.path.exists(paths[i]):
                return False
            try:
                out[i] = _read_16k(paths[i])
            except SynthError:
                pass
            return True

        run_festival(pending, lambda items: script(items, paths), done, who, timeout, d)
    return out


def run_festival(pending: List[tuple], script, done, who: str, timeout: float, cwd: str) -> None:
    """``festival -b`` over pending [(index, item)]: script(items) is the Scheme for them, and
    done(index) reads an item's output and says whether festival wrote one.  Festival crashes
    outright on some items (a segfault, not a Scheme error): the items after the first without
    output run again without it, until all are tried."""
    while pending:
        r = festival_batch(script(pending), cwd, timeout, f"{who} for {len(pending)} texts")
        left = [(i, x) for i, x in pending if not done(i)]
        if r.returncode == 0 or not left:
            return
        pending = left[1:]  # the first item without output is the one festival died on


def festival_batch(script: str, cwd: str, timeout: float, who: str) -> subprocess.CompletedProcess:
    """One ``festival -b`` over script (written to cwd/run.scm), its output as text; a run
    over timeout seconds is a SynthError naming who."""
    path = os.path.join(cwd, "run.scm")
    with open(path, "w", encoding="utf-8") as f:
        f.write(script)
    try:
        return subprocess.run(["festival", "-b", path], capture_output=True, text=True, errors="replace",
                              timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise SynthError(f"festival took over {timeout:.0f} s: {who}") from None
