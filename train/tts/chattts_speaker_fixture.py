#!/usr/bin/env python3
"""Golden ChatTTS speaker string for voices/chattts.go, made the way ChatTTS makes them.

ChatTTS encodes a speaker embedding as float16 bytes -> raw LZMA2 (preset 9 | extreme) ->
base16384. This script does the LZMA2 step with Python's lzma module (as ChatTTS does) and the
base16384 step with Debian's independent `base16384` tool (apt-get install base16384), so the
Go decoder is checked against implementations other than its own. Regenerate from the
repository root with:

  /usr/bin/python3 train/tts/chattts_speaker_fixture.py --out voices/testdata
"""
import argparse
import lzma
import os
import subprocess
import tempfile

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="voices/testdata")
    ap.add_argument("--dim", type=int, default=768)
    a = ap.parse_args()
    rng = np.random.default_rng(768)
    emb = (rng.normal(0, 0.5, a.dim)).astype(np.float16)
    raw = lzma.compress(emb.tobytes(), format=lzma.FORMAT_RAW,
                        filters=[{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}])
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in"), os.path.join(d, "out")
        with open(src, "wb") as f:
            f.write(raw)
        subprocess.run(["base16384", "-e", src, dst], check=True)
        enc = open(dst, "rb").read()
    if enc.startswith(b"\xfe\xff"):
        enc = enc[2:]
    text = enc.decode("utf-16-be")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "chattts_speaker.txt"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    emb.tofile(os.path.join(a.out, "chattts_speaker.f16"))
    print(len(text), "characters for", a.dim, "values")


if __name__ == "__main__":
    main()
