"""The voice-clone wizard measured end to end through the real `parley` CLI (issue 19's closing
measurement): an espeak-ng speaker that no Parley model has heard plays the user.

    /usr/bin/python3 -m train.clone_eval --parley bin/parley --out /tmp/parley-clone-eval \
        [--model DIR] [--voice en-gb-scotland+Alicia --rate 150 --pitch 50]

(`make clone-eval` runs it.) Everything happens in a private Parley home under OUT (data,
config and models directories), so the user's own voices, datasets and models are neither
used nor touched. The steps, each a `parley` command, each timed (wall seconds):

  collect    `finetune new` + `finetune prompts`: the person reads in one long recording
             (espeak-ng, a pause between readings) -> `finetune import`; what is read is the
             wizard's sentences (--text prompts) or, by default, sentences of the demo models'
             domain (--text demo): the demo recogniser writes little else, and it labels and
             scores here
  slice      `finetune slice` (Silero VAD, 2-15 s clips, quality checks)
  label      `finetune label` (the recogniser; its CER against what was read is reported)
  proofread  `finetune edit` of every clip whose transcript is not what was read
  train      `finetune train` (voice fine-tune: a speaker vector, the default)
  install    `finetune install`
  train-gpt, install-gpt   the same with --gpt (the GPT and decoder too: a model of its
             own, installed with the voice; --no-gpt leaves it out)
  clone      `voices clone` from the training clip nearest --clone-seconds (zero-shot)
  evaluate   `finetune evaluate --voice FINETUNED --voice CLONE --clone-seconds S`: speaker
             similarity and recogniser CER of a random seed voice, a zero-shot clone and the
             fine-tunes, on the held-out sentences (scored by --asr, the base recogniser)
  asr        `finetune asr` (improve recognition of my voice): held-out CER before/after

Writes OUT/results.json and OUT/results.md, and OUT/logs/<step>.log with each command's output.
The goals checked (issue 19): similarity random < clone < fine-tune (each fine-tune), and the
clone's CER at most 1.3x the random seed voices'; "random" is the mean of `finetune evaluate`'s
random seed voices (3 by default), since one draw lands anywhere in a spread of about 0.2.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np
import soundfile as sf

from .chattts.corpus import TEST_SPEAKERS as CHATTTS_TEST, TRAIN_SPEAKERS as CHATTTS_TRAIN
from .chattts.corpus import VOICE as CHATTTS_ACCENT
from .corpus.sentences import sentences
from .corpus.synth import ACCENTS, SR, TEST_VARIANTS, TRAIN_VARIANTS, espeak, spoken_form

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAUSE = 1.5  # seconds between sentences: more than the slicer's 1 s, so a clip is one sentence
NOISE = 3e-4  # room tone, about -70 dBFS


def seen_voice(voice: str) -> Optional[str]:
    """Why an espeak-ng voice was heard by one of Parley's models, or None."""
    accent, _, variant = voice.partition("+")
    low = variant.lower()
    if accent == CHATTTS_ACCENT and low in {s[0].lower() for s in CHATTTS_TRAIN + CHATTTS_TEST}:
        return f"{voice} is a speaker of the demo voice's corpus (train.chattts.corpus)"
    if low in {v.lower() for v in TRAIN_VARIANTS + TEST_VARIANTS} and accent in ACCENTS:
        return f"{voice}: the recogniser's and speaker encoder's corpora use variant {variant or 'default'} with accent {accent} (train.corpus.synth, train.speaker.corpus)"
    return None


def cer(ref: str, hyp: str) -> tuple:
    """Character errors and reference length, as Parley's scoring (tune.CharErrors) counts
    them: lower case letters, digits and apostrophes, anything else one word break."""
    norm = lambda s: " ".join(re.sub(r"[^\w']|_", " ", s.lower()).split())
    r, h = norm(ref), norm(hyp)
    prev = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        cur = [i] + [0] * len(h)
        for j in range(1, len(h) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r[i - 1] != h[j - 1]))
        prev = cur
    return prev[-1], len(r)


class Run:
    def __init__(self, a):
        self.a = a
        self.out = os.path.abspath(a.out)
        self.parley = os.path.abspath(a.parley)
        self.logs = os.path.join(self.out, "logs")
        self.times: Dict[str, float] = {}
        home = os.path.join(self.out, "home")
        self.env = dict(os.environ, XDG_DATA_HOME=os.path.join(home, "data"), XDG_CONFIG_HOME=os.path.join(home, "config"),
                        PARLEY_MODELS=os.path.join(home, "models"), LANG="C.UTF-8")
        self.env.pop("PARLEY_CONFIG", None)
        self.env.pop("PARLEY_TRAIN_DIR", None)

    def cli(self, step: str, *args: str, ok=(0,)) -> subprocess.CompletedProcess:
        """Runs parley ARGS, appending its output to logs/STEP.log and its time to the step."""
        t = time.monotonic()
        p = subprocess.run([self.parley, *args], env=self.env, capture_output=True, text=True)
        self.times[step] = self.times.get(step, 0.0) + time.monotonic() - t
        with open(os.path.join(self.logs, step + ".log"), "a", encoding="utf-8") as f:
            f.write(f"$ parley {' '.join(args)}\n{p.stdout}{p.stderr}[exit {p.returncode}]\n")
        if p.returncode not in ok:
            tail = (p.stderr or p.stdout).strip().splitlines()[-5:]
            raise SystemExit(f"clone_eval: step {step}: parley {' '.join(args)} exited {p.returncode}:\n  " + "\n  ".join(tail))
        return p

    def log(self, msg: str):
        print(f"clone_eval: {msg}", file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.clone_eval", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parley", default=os.path.join(ROOT, "bin", "parley"))
    ap.add_argument("--out", required=True, help="work directory (emptied first)")
    ap.add_argument("--model", default="", help="ChatTTS export (default: the installed one, else the embedded demo voice)")
    ap.add_argument("--voice", default="en-gb-scotland+Alicia", help="espeak-ng voice+variant playing the user")
    ap.add_argument("--rate", type=int, default=150)
    ap.add_argument("--pitch", type=int, default=50)
    ap.add_argument("--name", default="alicia", help="dataset name")
    ap.add_argument("--text", choices=["prompts", "demo"], default="demo",
                    help="what the person reads: the wizard's sentences (finetune prompts), or sentences of the demo "
                         "models' domain (train.corpus.sentences, joined to readings of at least 3 s), the only text "
                         "the demo recogniser can write, so its CERs mean something")
    ap.add_argument("--minutes", type=float, default=3.5, help="speech to read (the prompts are repeated if they are shorter)")
    ap.add_argument("--clone-seconds", type=float, default=3)
    ap.add_argument("--sentences", type=int, default=8, help="held-out sentences evaluate synthesises")
    ap.add_argument("--epochs", type=int, default=0, help="finetune train --epochs (0 = its default)")
    ap.add_argument("--asr-epochs", type=int, default=0, help="finetune asr --epochs (0 = its default)")
    ap.add_argument("--asr", default="sensevoice-demo", help="the recogniser that labels and scores (the base one)")
    ap.add_argument("--no-gpt", dest="gpt", action="store_false",
                    help="leave out the second voice fine-tune (finetune train --gpt: GPT and decoder too)")
    ap.add_argument("--skip-asr", action="store_true", help="leave out the recogniser fine-tune")
    a = ap.parse_args(argv)

    why = seen_voice(a.voice)
    if why:
        raise SystemExit(f"clone_eval: --voice {why}; pick a voice no model has heard")
    r = Run(a)
    if os.path.exists(r.out):
        shutil.rmtree(r.out)
    os.makedirs(r.logs)
    model = ["--model", os.path.abspath(a.model)] if a.model else []

    # a private home: the pinned third-party files (Silero VAD …) from set-up's download cache
    t = time.monotonic()
    p = subprocess.run([os.path.join(ROOT, "build", "setup.sh"), "fetch"], env=r.env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"clone_eval: build/setup.sh fetch (run `make setup` first?):\n{p.stderr.strip()}")
    r.log(f"private Parley home in {r.out}/home ({time.monotonic() - t:.1f} s)")

    # collect: the person reads the wizard's sentences in one recording
    name = a.name
    r.cli("collect", "finetune", "new", name)
    out = r.cli("collect", "finetune", "prompts", name).stdout
    prompts = [m.group(2).strip() for m in (re.match(r"^\s*(\d+)[ *] (.+)$", l) for l in out.splitlines()) if m]
    if not prompts:
        raise SystemExit(f"clone_eval: no sentences in `parley finetune prompts {name}`:\n{out}")
    if a.text == "demo":  # the demo models' domain (what the demo recogniser can write)
        prompts = sentences(4000, 19)
    rng = np.random.default_rng(19)
    pieces = [(rng.standard_normal(int(0.8 * SR)) * NOISE).astype(np.float32)]
    spans = []  # (start, end, text) of each sentence in the recording
    pos, said, t = len(pieces[0]), 0.0, time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        i = 0
        while said < a.minutes * 60:
            parts = [prompts[i % len(prompts)]]
            i += 1
            x = espeak(spoken_form(parts[0]), a.voice, a.rate, a.pitch, tmp)
            while len(x) < 3 * SR and a.text == "demo":  # a reading of at least 3 s, as user_voice's takes
                parts.append(prompts[i % len(prompts)])
                i += 1
                x = espeak(spoken_form(". ".join(parts)), a.voice, a.rate, a.pitch, tmp)
            text = " ".join(parts)
            nz = np.nonzero(np.abs(x) > 1e-3)[0]
            x = x[nz[0]:nz[-1] + 1] if len(nz) else x
            spans.append((pos / SR, (pos + len(x)) / SR, text))
            gap = (rng.standard_normal(int(PAUSE * SR)) * NOISE).astype(np.float32)
            pieces += [x + (rng.standard_normal(len(x)) * NOISE).astype(np.float32), gap]
            pos += len(x) + len(gap)
            said += len(x) / SR
    rec = os.path.join(r.out, "reading.wav")
    sf.write(rec, np.concatenate(pieces), SR, subtype="PCM_16")
    r.log(f"{a.voice} (rate {a.rate}, pitch {a.pitch}) read {len(spans)} sentences: {said / 60:.1f} min of speech "
          f"in {pos / SR / 60:.1f} min ({time.monotonic() - t:.0f} s to synthesise; not a wizard step)")
    r.cli("collect", "finetune", "import", name, rec)

    r.cli("slice", "finetune", "slice", name)
    r.cli("label", "finetune", "label", name, "--model", a.asr)

    # proofread: every clip's transcript made what was read (the sentences inside it)
    clips = json.loads(r.cli("proofread", "finetune", "clips", name, "--json").stdout)
    lab_err = lab_len = edits = drops = 0
    for c in clips:
        truth = " ".join(s[2] for s in spans if c["start"] <= (s[0] + s[1]) / 2 < c["end"])
        if not truth:
            r.cli("proofread", "finetune", "drop", name, c["id"])
            drops += 1
            continue
        e, n = cer(truth, c.get("text", ""))
        lab_err, lab_len = lab_err + e, lab_len + n
        if c.get("text", "") != truth:
            r.cli("proofread", "finetune", "edit", name, c["id"], truth)
            edits += 1
    status = json.loads(r.cli("proofread", "finetune", "status", name, "--json").stdout)["summary"]
    r.log(f"{status['usable']} usable clips, {status['usable_minutes']:.2f} min; labels {100 * lab_err / max(lab_len, 1):.1f}% CER, "
          f"{edits} edited, {drops} dropped")

    train_args = ["finetune", "train", name, *model]
    if a.epochs:
        train_args += ["--epochs", str(a.epochs)]
    r.cli("train", *train_args, "--gpt=false")  # the speaker vector (on the demo voice --gpt is the default)
    m = re.search(r"voice (\S+) installed", r.cli("install", "finetune", "install", name).stdout)
    voice = m.group(1) if m else name
    gpt_voice = ""
    if a.gpt:  # the fine-tune that also trains the GPT and decoder: a model of its own
        r.cli("train-gpt", *train_args, "--gpt", "--new")
        out = r.cli("install-gpt", "finetune", "install", name, "--name", name + "-gpt").stdout
        m = re.search(r"voice (\S+) installed with its model (\S+)", out)
        if not m:
            raise SystemExit(f"clone_eval: finetune install after --gpt installed no model:\n{out}")
        gpt_voice = f"{m.group(1)}@{m.group(2)}"

    # zero-shot: a clone from the training clip nearest --clone-seconds, its proofread text
    jobs = json.loads(r.cli("clone", "finetune", "jobs", "--json").stdout)
    job = next(j for j in jobs if j["kind"] == "tts-finetune")
    with open(os.path.join(job["dir"], "clips.jsonl"), encoding="utf-8") as f:
        train_ids = {json.loads(l)["key"] for l in f if l.strip()}
    usable = json.loads(r.cli("clone", "finetune", "clips", name, "--json").stdout)
    pick = min((c for c in usable if c["id"] in train_ids), key=lambda c: abs(c["seconds"] - a.clone_seconds))
    dsdir = json.loads(r.cli("clone", "finetune", "status", name, "--json").stdout)["dir"]
    r.times["clone"] = 0.0  # the look-ups above are the recipe's, not the wizard's
    clone_name = name + "-clone"
    r.cli("clone", "voices", "clone", os.path.join(dsdir, pick["path"]), "--name", clone_name, "--text", pick["text"], *model)

    extra = ["--voice", gpt_voice] if gpt_voice else []
    ev = json.loads(r.cli("evaluate", "finetune", "evaluate", name, "--voice", voice, *extra, "--voice", clone_name,
                          "--clone-seconds", str(a.clone_seconds), "--sentences", str(a.sentences),
                          "--asr", a.asr, "--json", *model).stdout)

    asr_res = None
    if not a.skip_asr:
        asr_args = ["finetune", "asr", name, "--base", a.asr]
        if a.asr_epochs:
            asr_args += ["--epochs", str(a.asr_epochs)]
        r.cli("asr", *asr_args, ok=(0, 1))
        for j in json.loads(r.cli("asr", "finetune", "jobs", "--json").stdout):
            res = (j.get("progress") or {}).get("results", {}).get("evaluate")
            if j["kind"] == "asr-finetune" and res:
                asr_res = res
                break

    results = report(a, r, ev, voice, gpt_voice, clone_name, pick, status, lab_err, lab_len, edits, drops, len(spans), said, asr_res)
    with open(os.path.join(r.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    md = markdown(results)
    with open(os.path.join(r.out, "results.md"), "w", encoding="utf-8") as f:
        f.write(md)
    print(md)
    return 0


def report(a, r, ev, voice, gpt_voice, clone_name, pick, status, lab_err, lab_len, edits, drops, n_sent, said, asr_res) -> dict:
    rows = ev["voices"]
    by = lambda pred: next((v for v in rows if pred(v["name"])), None)
    randoms = [v for v in rows if v["name"].startswith("random seed")]
    # one random draw is luck (seeds spread by +-0.1 in similarity): the baseline is their mean
    # (of each voice's similarity and CER; the voices say the same sentences)
    random_v = ({"name": f"random seed voices (mean of {len(randoms)})",
                 "similarity": float(np.mean([v["similarity"] for v in randoms])),
                 "cer": float(np.mean([v["cer"] for v in randoms]))} if randoms else None)
    zero_v = by(lambda n: n.startswith("zero-shot clone"))
    tuned_v = by(lambda n: n == voice)
    gpt_v = by(lambda n: n == gpt_voice) if gpt_voice else None
    cloned_v = by(lambda n: n == clone_name)
    goals = {}
    if random_v and zero_v:
        for label, t in (("speaker-vector fine-tune", tuned_v), ("GPT fine-tune", gpt_v)):
            if t:
                goals[f"similarity random < clone < {label}"] = random_v["similarity"] < zero_v["similarity"] < t["similarity"]
        base = random_v["cer"]
        goals["clone CER <= 1.3x random seeds'"] = zero_v["cer"] <= 1.3 * base if base > 0 else zero_v["cer"] == 0
    out = {
        "command": " ".join(["python3 -m train.clone_eval", *sys.argv[1:]]),
        "speaker": {"voice": a.voice, "text": a.text, "rate": a.rate, "pitch": a.pitch, "sentences_read": n_sent,
                    "speech_minutes": round(said / 60, 2)},
        "dataset": {"usable_clips": status["usable"], "usable_minutes": round(status["usable_minutes"], 2),
                    "rejected": status.get("rejected") or {}, "label_cer": round(lab_err / max(lab_len, 1), 4),
                    "proofread_edits": edits, "dropped": drops},
        "voice_model": ev["model"], "speaker_encoder": ev["speaker_encoder"], "recogniser": ev["recogniser"],
        "held_out_clips": ev["held_out_clips"], "sentences": ev["sentences"],
        "clone_clip": {"id": pick["id"], "seconds": pick["seconds"]},
        "voices": rows,
        "rows": {"random_seed": random_v, "zero_shot_clone": zero_v, "fine_tune": tuned_v, "fine_tune_gpt": gpt_v,
                 "voices_clone": cloned_v},
        "goals": goals,
        "wall_seconds": {k: round(v, 1) for k, v in r.times.items()},
        "cores": os.cpu_count(),
        "load_average": os.getloadavg()[0],
    }
    if asr_res:
        out["asr"] = {"held_out_clips": len((asr_res.get("after") or {}).get("clips") or []),
                      "cer_before": asr_res["before"]["cer"], "cer_after": asr_res["after"]["cer"],
                      "installed": asr_res.get("installed", ""), "message": asr_res.get("message", "")}
    return out


def markdown(res: dict) -> str:
    s = res["speaker"]
    lines = [f"# Voice-clone wizard, measured ({os.path.basename(res['voice_model'].rstrip('/'))})", "",
             f"Speaker: espeak-ng `{s['voice']}` rate {s['rate']} pitch {s['pitch']}, {s['sentences_read']} readings "
             f"of {'the wizard prompts' if s['text'] == 'prompts' else 'demo-domain sentences'}, {s['speech_minutes']} min of speech; {res['dataset']['usable_clips']} usable clips "
             f"({res['dataset']['usable_minutes']} min), labels {100 * res['dataset']['label_cer']:.1f}% CER before proofreading.",
             f"Scored on {res['sentences']} held-out sentences ({res['held_out_clips']} held-out clips) by "
             f"{res['speaker_encoder']} and {res['recogniser']}.", "",
             "| voice | speaker similarity | CER | audio s | synth s |", "|---|---|---|---|---|"]
    for v in res["voices"]:
        lines.append(f"| {v['name']} | {v['similarity']:.3f} | {100 * v['cer']:.1f}% | {v['audio_s']:.1f} | {v['synth_s']:.1f} |")
    if res["rows"].get("random_seed"):
        m = res["rows"]["random_seed"]
        lines.append(f"| {m['name']} | {m['similarity']:.3f} | {100 * m['cer']:.1f}% | | |")
    lines += ["", "Goals: " + (", ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in res["goals"].items()) or "not scored"), ""]
    if "asr" in res:
        x = res["asr"]
        lines += [f"Recogniser fine-tune: held-out CER {100 * x['cer_before']:.1f}% → {100 * x['cer_after']:.1f}% "
                  f"on {x['held_out_clips']} clips ({x['message']})", ""]
    lines += ["| step | wall s |", "|---|---|"]
    lines += [f"| {k} | {v:.1f} |" for k, v in res["wall_seconds"].items()]
    lines += ["", f"{res['cores']} cores, load average {res['load_average']:.1f} at the end.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
