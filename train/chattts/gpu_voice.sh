#!/usr/bin/env bash
# The demo voice's GPT trained from its start on a borrowed GPU machine (or anywhere: it runs on
# the CPU too, only far slower), for a voice whose DVAE was trained afresh (the human-derived
# voice, train/Makefile demo-tts-human-*).  Everything it reads is one pack (`train.chattts.train
# pack --checkpoint DVAE_CKPT`: the DVAE codes of the corpus, the tokenizer and the freshly
# initialised GPT, a few MB); it writes the trained GPT as parts small enough to carry back.
#
#   train/chattts/gpu_voice.sh PACK.tar.xz OUT_DIR [SECONDS]
#
# Two phases share SECONDS (default 420): phase A (40 %) teacher-forced on the coarse streams
# with clone prompts, guided attention and code dropout 0.5 (phases 1-4 of the CPU recipe);
# phase B (60 %) with 80 % of the code frames the model's own, predicted twice and drawn at the
# engine's temperature (phases 5-10).  Each phase's cosine is fitted to the steps that fit
# (--time-budget-s).  Environment: PY (default python3), WORK (scratch, default /tmp/parley-gpu),
# LR_A / LR_B (default 1.5e-3 / 6e-4), GPU_FLAGS (extra flags for both phases).
set -euo pipefail
pack=${1:?usage: gpu_voice.sh PACK.tar.xz OUT_DIR [SECONDS]}
out=${2:?usage: gpu_voice.sh PACK.tar.xz OUT_DIR [SECONDS]}
seconds=${3:-420}
PY=${PY:-python3}
work=${WORK:-/tmp/parley-gpu}
mkdir -p "$out" "$work/feats"
log() { printf '%s %s\n' "$(date +%s)" "$*" | tee -a "$out/steps.log"; }

log "unpack $pack"
"$PY" -c 'import sys, tarfile; t = tarfile.open(sys.argv[1]); t.extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))' "$pack" "$work/feats"
"$PY" -c 'import torch, sys; print(f"torch {torch.__version__} python {sys.version.split()[0]} cuda {torch.cuda.is_available()}", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' | tee -a "$out/steps.log"

BATCH="--batch-size 24000 --batch-size-sample-max 96 --amp bf16 --num-workers 6"
[ "$("$PY" -c 'import torch; print(torch.cuda.is_available())')" = True ] || BATCH="--batch-size 3000 --batch-size-sample-max 24"
COMMON="--neutral-streams 1,3 --prefix-prob 0.5 --ga-weight 1.0 --clip 1 --scheduler cosine --weight-decay 0.01 --epochs 500"
a_s=$((seconds * 2 / 5))
b_s=$((seconds - a_s))

log "phase A (${a_s} s, lr ${LR_A:-1.5e-3})"
"$PY" -m train.chattts.train gpt --feats "$work/feats" --out "$work/gptA" --init "$work/feats/init.pt" \
	$COMMON $BATCH --code-dropout 0.5 --lr "${LR_A:-1.5e-3}" --warmup 200 --time-budget-s "$a_s" \
	--log-interval 25 --val-interval 500 --save-interval 500 --keep-checkpoints 1 --seed 71 ${GPU_FLAGS:-} \
	> "$out/gptA.log" 2>&1 || { tail -30 "$out/gptA.log"; exit 1; }
last=$(ls "$work"/gptA/ckpt-*.pt | tail -1)

log "phase B (${b_s} s, lr ${LR_B:-6e-4}) from $last"
"$PY" -m train.chattts.train gpt --feats "$work/feats" --out "$work/gptB" --init "$last" \
	$COMMON $BATCH --code-dropout 0.3 --sched-sampling 0.8 --sched-passes 2 --sched-temperature 0.3 \
	--lr "${LR_B:-6e-4}" --warmup 50 --time-budget-s "$b_s" --log-interval 25 --val-interval 500 \
	--save-interval 500 --keep-checkpoints 1 --seed 72 ${GPU_FLAGS:-} > "$out/gptB.log" 2>&1 || { tail -30 "$out/gptB.log"; exit 1; }
last=$(ls "$work"/gptB/ckpt-*.pt | tail -1)

log "merge $last"
"$PY" -m train.chattts.train merge --feats "$work/feats" --checkpoint "$last" --split-mb 15 --out "$out/model"
grep '"event": "val"' "$out/gptA.log" "$out/gptB.log" | tail -4 | tee -a "$out/steps.log" || true
log "done"
