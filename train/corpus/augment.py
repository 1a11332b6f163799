"""Speaker augmentation and acoustic conditions for the human-derived corpus.

A few recorded people become hundreds of distinct speakers: a ``Speaker`` is a source voice
plus a vocal-tract length (formant warp), a mean pitch and pitch range, a speaking rate and a
voice-quality tilt.  The warp is made the way a shorter or longer vocal tract sounds: the
synthesiser speaks at pitch F/alpha and duration d*alpha, and the audio is resampled by alpha,
which scales every formant by alpha and brings pitch and duration back to F and d (for voices
whose engine cannot set its pitch, pitch moves with the formants).

Conditions are drawn per utterance and recorded in its manifest row (``aug``):

- room: a synthetic impulse response (early reflections and a two-band exponential tail,
  RT60 0.15-0.9 s, direct-to-reverberant ratio -3..12 dB);
- noise at 0-30 dB SNR: white, pink, brown, hum, fan, tonal "music", or babble made from
  other utterances of the corpus itself;
- microphone and channel: random peaking EQ, band limits, the 8 kHz telephone band with
  mu-law companding;
- codec round trips through ffmpeg (mp3, opus, gsm);
- level: -40..-12 dBFS RMS, rarely clipped.

Everything is driven by a numpy Generator, so one seed gives the same audio again.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from scipy.signal import butter, fftconvolve, resample_poly, sosfilt

from .voices import SR, Knobs, Voice


@dataclass(frozen=True)
class Speaker:
    id: str
    voice: str        # voice id (voices.VOICES or espeak-ng:NAME)
    f0: float         # mean F0 in Hz the listener hears
    f0_range: float   # intonation width, as a factor of the voice's own
    warp: float       # formant (vocal-tract) scale: > 1 shorter tract, higher formants
    stretch: float    # habitual speaking rate as a duration factor (> 1 slower)
    tilt: float       # voice-quality tilt in dB per octave above 1 kHz (< 0 darker)
    vary: bool = True  # rate and pitch vary a little per utterance (False: the voice as recorded)

    def to_dict(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> "Speaker":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def draw_speaker(sid: str, v: Voice, rng: np.random.Generator, plain: bool = False) -> Speaker:
    """A new speaker from voice v.  ``plain`` keeps the voice as recorded (the source voice
    itself, for the held-out voice's plain test set)."""
    if plain:
        return Speaker(sid, v.id, float(v.f0), 1.0, 1.0, 1.0, 0.0, vary=False)
    # Warp and pitch are drawn together, as in people: a shorter vocal tract mostly comes with a
    # higher voice.  About half the speakers cross to the other register from the recording's.
    target_f = rng.random() < (0.55 if v.sex == "m" else 0.45)
    f0 = float(np.exp(rng.normal(np.log(205 if target_f else 112), 0.16)))
    f0 = float(np.clip(f0, 70, 320))
    base_warp = 1.12 if (target_f and v.sex == "m") else (0.9 if (not target_f and v.sex == "f") else 1.0)
    warp = float(np.clip(base_warp * np.exp(rng.normal(0, 0.045)), 0.82, 1.25))
    if not v.can_pitch or v.engine == "espeak-ng":
        warp = float(np.clip(np.exp(rng.normal(0, 0.05)), 0.88, 1.12))
    return Speaker(sid, v.id, f0, float(np.exp(rng.normal(0, 0.25))), warp,
                   float(np.clip(np.exp(rng.normal(0, 0.1)), 0.78, 1.3)), float(rng.normal(0, 1.5)))


def utterance_knobs(sp: Speaker, v: Voice, rng: np.random.Generator) -> Tuple[Knobs, float]:
    """The synthesiser's knobs for one utterance of sp, and the resample factor to apply after.
    Rate and pitch vary a little from one utterance to the next, as a person's do."""
    if not sp.vary:
        rng = None
    stretch = sp.stretch * (float(np.exp(rng.normal(0, 0.07))) if rng is not None else 1.0)
    f0 = sp.f0 * (float(np.exp(rng.normal(0, 0.04))) if rng is not None else 1.0)
    if v.can_pitch:
        return Knobs(f0=None if not sp.vary and sp.warp == 1 else f0 / sp.warp, f0_range=sp.f0_range,
                     stretch=stretch * sp.warp), sp.warp
    return Knobs(f0=None, f0_range=sp.f0_range, stretch=stretch * sp.warp), sp.warp


def warp(x: np.ndarray, alpha: float) -> np.ndarray:
    """Every frequency times alpha (and the duration over alpha): a resample."""
    if abs(alpha - 1) < 1e-3:
        return x
    fr = Fraction(alpha).limit_denominator(64)
    return resample_poly(x, fr.denominator, fr.numerator).astype(np.float32)


def _peaking(f0: float, gain_db: float, q: float) -> np.ndarray:
    """RBJ cookbook peaking EQ as one second-order section."""
    a = 10 ** (gain_db / 40)
    w = 2 * np.pi * f0 / SR
    alpha = np.sin(w) / (2 * q)
    b = [1 + alpha * a, -2 * np.cos(w), 1 - alpha * a]
    den = [1 + alpha / a, -2 * np.cos(w), 1 - alpha / a]
    return np.array([b[0] / den[0], b[1] / den[0], b[2] / den[0], 1.0, den[1] / den[0], den[2] / den[0]])


def tilt(x: np.ndarray, db_per_octave: float) -> np.ndarray:
    """A gentle spectral tilt above 1 kHz (two shelving peaks approximate it)."""
    if abs(db_per_octave) < 0.05:
        return x
    sos = np.stack([_peaking(2000, db_per_octave, 0.5), _peaking(5000, 1.6 * db_per_octave, 0.5)])
    return sosfilt(sos, x).astype(np.float32)


def room_ir(rng: np.random.Generator) -> Tuple[np.ndarray, dict]:
    rt60 = float(rng.uniform(0.15, 0.9))
    n = int(rt60 * SR)
    t = np.arange(n) / SR
    noise = rng.standard_normal(n)
    low = sosfilt(butter(2, 1500, "low", fs=SR, output="sos"), noise)
    tail = low * np.exp(-6.9 * t / rt60) + (noise - low) * np.exp(-6.9 * t / (0.55 * rt60))
    onset = int(rng.uniform(0.003, 0.012) * SR)
    tail[:onset] *= np.linspace(0, 1, onset)
    ir = np.zeros(n)
    ir[0] = 1.0
    for _ in range(int(rng.integers(3, 10))):  # early reflections off walls, floor and table
        d = int(rng.uniform(0.0015, 0.035) * SR)
        ir[d] += rng.uniform(-0.7, 0.7) * np.exp(-6.9 * d / SR / rt60)
    drr = float(rng.uniform(-3, 12))
    tail *= np.sqrt(1.0 / ((tail ** 2).sum() * 10 ** (drr / 10) + 1e-12))
    ir += tail
    return (ir / np.sqrt((ir ** 2).sum())).astype(np.float32), {"rt60": round(rt60, 3), "drr": round(drr, 1)}


def colored(n: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    w = rng.standard_normal(n)
    if kind == "white":
        return w
    spec = np.fft.rfft(w)
    f = np.arange(len(spec)) + 1.0
    spec /= np.sqrt(f) if kind == "pink" else f
    return np.fft.irfft(spec, n)


def hum(n: int, rng: np.random.Generator) -> np.ndarray:
    base = float(rng.choice([50.0, 60.0]))
    t = np.arange(n) / SR
    x = sum(rng.uniform(0.2, 1) / k * np.sin(2 * np.pi * base * k * t + rng.uniform(0, 6.3)) for k in range(1, 8))
    return x + 0.05 * rng.standard_normal(n)


def fan(n: int, rng: np.random.Generator) -> np.ndarray:
    x = sosfilt(butter(2, rng.uniform(300, 2500), "low", fs=SR, output="sos"), rng.standard_normal(n))
    t = np.arange(n) / SR
    return x + 0.3 * np.std(x) * np.sin(2 * np.pi * rng.uniform(80, 400) * t)


def music(n: int, rng: np.random.Generator) -> np.ndarray:
    """Notes of a few partials with plucked envelopes: something tonal that is not speech."""
    x = np.zeros(n)
    step = int(rng.uniform(0.15, 0.5) * SR)
    t = np.arange(step * 3) / SR
    for s in range(0, n, step):
        f = 110 * 2 ** (rng.integers(0, 36) / 12)
        note = sum(np.sin(2 * np.pi * f * k * t) / k for k in range(1, 5)) * np.exp(-t * rng.uniform(2, 8))
        e = min(n, s + len(note))
        x[s:e] += note[: e - s]
    return x


def babble(n: int, others: Sequence[np.ndarray], rng: np.random.Generator) -> Optional[np.ndarray]:
    if not others:
        return None
    x = np.zeros(n)
    for _ in range(int(rng.integers(3, 8))):
        o = others[int(rng.integers(0, len(others)))]
        o = o / (np.sqrt(np.mean(o ** 2)) + 1e-9)
        off = int(rng.integers(0, max(1, len(o))))
        reps = np.tile(o, n // max(1, len(o)) + 2)[off: off + n]
        x[: len(reps)] += reps
    return x


NOISES = ("white", "pink", "brown", "hum", "fan", "music", "babble")


def add_noise(x: np.ndarray, snr_db: float, kind: str, rng: np.random.Generator,
              others: Sequence[np.ndarray] = ()) -> np.ndarray:
    n = len(x)
    if kind == "babble":
        nz = babble(n, others, rng)
        if nz is None:
            nz = colored(n, "pink", rng)
    elif kind == "hum":
        nz = hum(n, rng)
    elif kind == "fan":
        nz = fan(n, rng)
    elif kind == "music":
        nz = music(n, rng)
    else:
        nz = colored(n, kind, rng)
    ps = np.mean(x ** 2) + 1e-12
    pn = np.mean(nz ** 2) + 1e-12
    return (x + nz * np.sqrt(ps / (pn * 10 ** (snr_db / 10)))).astype(np.float32)


def mulaw(x: np.ndarray, mu: int = 255) -> np.ndarray:
    peak = np.abs(x).max() + 1e-9
    y = np.sign(x) * np.log1p(mu * np.abs(x / peak)) / np.log1p(mu)
    y = np.round(y * 127) / 127
    return (np.sign(y) * ((1 + mu) ** np.abs(y) - 1) / mu * peak).astype(np.float32)


def channel(x: np.ndarray, rng: np.random.Generator) -> Tuple[np.ndarray, dict]:
    """A microphone and the path behind it: random EQ, band limits, sometimes the phone band."""
    info: dict = {}
    if rng.random() < 0.2:
        info["telephone"] = True
        x = sosfilt(butter(4, [300, 3400], "band", fs=SR, output="sos"), x)
        x = resample_poly(resample_poly(x, 1, 2), 2, 1)
        return mulaw(x), info
    sos = [_peaking(float(np.exp(rng.uniform(np.log(150), np.log(6500)))), float(rng.uniform(-9, 9)),
                    float(rng.uniform(0.5, 2.5))) for _ in range(int(rng.integers(1, 4)))]
    x = sosfilt(np.stack(sos), x)
    info["eq"] = len(sos)
    if rng.random() < 0.6:
        lp = float(rng.uniform(3500, 7800))
        x = sosfilt(butter(6, lp, "low", fs=SR, output="sos"), x)
        info["lowpass"] = round(lp)
    if rng.random() < 0.5:
        hp = float(rng.uniform(60, 350))
        x = sosfilt(butter(2, hp, "high", fs=SR, output="sos"), x)
        info["highpass"] = round(hp)
    return x.astype(np.float32), info


CODECS = {  # name -> (ffmpeg encoder args, container extension, bitrates)
    "mp3": (["-c:a", "libmp3lame"], "mp3", ["16k", "24k", "32k", "48k"]),
    "opus": (["-c:a", "libopus"], "ogg", ["8k", "12k", "16k", "24k"]),
    "gsm": (["-c:a", "libgsm", "-ar", "8000"], "gsm", [""]),
}


def codec(x: np.ndarray, rng: np.random.Generator, tmpdir: Optional[str] = None) -> Tuple[np.ndarray, dict]:
    """A round trip through a lossy codec (ffmpeg).  Returns x unchanged, with the reason,
    when ffmpeg is missing or fails."""
    name = str(rng.choice(list(CODECS)))
    args, ext, rates = CODECS[name]
    rate = str(rng.choice(rates))
    pcm = (np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()
    fd, path = tempfile.mkstemp(suffix="." + ext, dir=tmpdir)
    os.close(fd)
    try:
        enc = ["ffmpeg", "-v", "error", "-y", "-f", "s16le", "-ar", str(SR), "-ac", "1", "-i", "-", *args]
        if rate:
            enc += ["-b:a", rate]
        r = subprocess.run(enc + [path], input=pcm, capture_output=True, timeout=60)
        if r.returncode != 0:
            return x, {"codec_failed": name}
        r = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-f", "s16le", "-ar", str(SR), "-ac", "1", "-"],
                           capture_output=True, timeout=60)
        if r.returncode != 0 or not r.stdout:
            return x, {"codec_failed": name}
    except (OSError, subprocess.TimeoutExpired):
        return x, {"codec_failed": name}
    finally:
        os.remove(path)
    y = np.frombuffer(r.stdout, "<i2").astype(np.float32) / 32768
    # codecs add a little delay and padding: keep the length the same
    y = np.pad(y, (0, max(0, len(x) - len(y))))[: len(x)]
    return y, {"codec": name + (f"@{rate}" if rate else "")}


@dataclass
class Conditions:
    """Probabilities of each condition for one split."""
    room: float = 0.4
    noise: float = 0.5
    channel: float = 0.4
    codec: float = 0.1
    snr: Tuple[float, float] = (0.0, 30.0)

    @classmethod
    def clean(cls) -> "Conditions":
        return cls(0.0, 0.0, 0.0, 0.0)


def condition(x: np.ndarray, rng: np.random.Generator, cond: Conditions, others: Sequence[np.ndarray] = (),
              tmpdir: Optional[str] = None) -> Tuple[np.ndarray, dict]:
    """Room, noise, channel, codec and level for one utterance -> (audio, what was done)."""
    info: Dict[str, object] = {}
    lead, tail_s = rng.uniform(0.05, 0.6), rng.uniform(0.1, 0.6)
    x = np.concatenate([np.zeros(int(lead * SR), np.float32), x, np.zeros(int(tail_s * SR), np.float32)])
    if rng.random() < cond.room:
        ir, info["room"] = room_ir(rng)
        x = fftconvolve(x, ir)[: len(x)].astype(np.float32)
    if rng.random() < cond.noise:
        kind = str(rng.choice(NOISES, p=[0.12, 0.18, 0.1, 0.08, 0.12, 0.1, 0.3]))
        snr = float(rng.uniform(*cond.snr))
        x = add_noise(x, snr, kind, rng, others)
        info["noise"], info["snr"] = kind, round(snr, 1)
    else:
        # a real microphone is never digitally silent
        x = x + (np.sqrt(np.mean(x ** 2)) * 10 ** (-rng.uniform(45, 70) / 20) * rng.standard_normal(len(x))).astype(np.float32)
    if rng.random() < cond.channel:
        x, info["channel"] = channel(x, rng)
    if rng.random() < cond.codec:
        x, c = codec(x, rng, tmpdir)
        info.update(c)
    level = float(rng.uniform(-40, -12))
    x = x * (10 ** (level / 20) / (np.sqrt(np.mean(x ** 2)) + 1e-9))
    if rng.random() < 0.02:
        info["clipped"] = True
        x = np.clip(x * 3, -1, 1)
    peak = np.abs(x).max()
    if peak > 0.99:  # no accidental clipping
        x = x * (0.99 / peak)
    info["level"] = round(level, 1)
    return x.astype(np.float32), info
