#!/usr/bin/env bash
# A GPT phase of the demo voice on a borrowed GPU machine (or anywhere: it runs on the CPU too,
# only far slower).  Everything it reads is in one pack (`train.chattts.train pack`: the DVAE
# codes of the corpus and the GPT to start from, a few MB), so it needs nothing but this
# repository's train/ and a PyTorch; it writes the trained model as parts small enough to carry
# back (`merge --split-mb`), and the logs.
#
#   [LRS="6e-4 2.5e-4"] train/chattts/gpu_phase.sh PACK.tar.xz OUT_DIR [SECONDS]
#
# A pack made with --bundle (the GPT left out) gets its init.pt from that export here
# (`train.chattts.train bundle-init`; BUNDLE, default assets/demo/chattts, which the repository
# carries), after checking it is the same gpt.onnx.
#
# Steps: unpack -> re-fit the training speaker table, everything else frozen (the pack's GPT
# comes from an exported bundle, which has no table) -> the phase itself, phases 5-10's
# regularisers at a GPU batch, for SECONDS (default 420) with the cosine fitted to the steps that
# fit, one run per learning rate in LRS -> merge each into OUT_DIR/lrLR/model.  Environment: PY
# (default python3), WORK (scratch, default /tmp/parley-gpu), LRS (default 6e-4), SPK_STEPS (the
# speaker table's steps, default 150; 0 skips the re-fit, for a pack made from a training
# checkpoint, which has its table), RUNS (instead of LRS: SIZE@LR items, e.g. "demo8@6e-4", each
# a run deepened to SIZE with --deepen, merged into OUT_DIR/SIZE-LR/model), GPU_FLAGS
# (extra flags for the phase).  Back here: merge --base fills in the decoder, Vocos and
# DVAE the pack left out, then `gpt --only decoder` fits the decoder to the new GPT (train/Makefile
# demo-tts-gpu).
set -euo pipefail
pack=${1:?usage: gpu_phase.sh PACK.tar.xz OUT_DIR [SECONDS]}
out=${2:?usage: gpu_phase.sh PACK.tar.xz OUT_DIR [SECONDS]}
seconds=${3:-420}
PY=${PY:-python3}
work=${WORK:-/tmp/parley-gpu}
rm -rf "$work/feats" # an earlier pack's files (its init.pt above all) must not outlive it
mkdir -p "$out" "$work/feats"
log() { printf '%s %s\n' "$(date +%s)" "$*" | tee -a "$out/steps.log"; }

log "unpack $pack"
"$PY" -c 'import sys, tarfile; t = tarfile.open(sys.argv[1]); t.extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))' "$pack" "$work/feats"
"$PY" -c 'import torch, sys; print(f"torch {torch.__version__} python {sys.version.split()[0]} cuda {torch.cuda.is_available()}", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' | tee -a "$out/steps.log"

# A batch of up to 96 utterances (24k tokens), 8x phases 5-10's: the GPU is not kept busy by
# the small model at their batch of 3000 tokens.
BATCH="--batch-size 24000 --batch-size-sample-max 96 --amp bf16 --num-workers 6"
COMMON="--neutral-streams 1,3 --prefix-prob 0.5 --ga-weight 1.0 --code-dropout 0.3 --clip 1 --scheduler cosine"

start="$work/feats/init.pt"
if [ ! -f "$start" ] && [ -f "$work/feats/bundle.json" ]; then
	log "init from ${BUNDLE:-assets/demo/chattts}"
	"$PY" -m train.chattts.train bundle-init --feats "$work/feats" --bundle "${BUNDLE:-assets/demo/chattts}" | tee -a "$out/steps.log"
fi
if [ "${SPK_STEPS:-150}" != 0 ]; then
	log "speakers"
	"$PY" -m train.chattts.train gpt --feats "$work/feats" --out "$work/spk" --init "$start" \
		--only speakers $COMMON $BATCH --epochs 1 --max-steps "${SPK_STEPS:-150}" --lr 1e-2 --warmup 10 --weight-decay 0 \
		--log-interval 25 --seed 51 2>&1 | tee "$out/spk.log"
	start=$(ls "$work"/spk/ckpt-*.pt | tail -1)
fi

# One run per learning rate in LRS (or per SIZE@LR in RUNS), side by side (a small model leaves
# the GPU idle between its kernels, so two runs cost little more than one); each gets the whole time.
LRS=${LRS:-6e-4}
RUNS=${RUNS:-}
if [ -z "$RUNS" ]; then
	for lr in $LRS; do RUNS="$RUNS @$lr"; done
fi
name() { local size=${1%@*} lr=${1#*@}; if [ -n "$size" ]; then echo "$size-$lr"; else echo "lr$lr"; fi; }
pids=()
for run in $RUNS; do
	size=${run%@*} lr=${run#*@} dir="$out/$(name "$run")"
	mkdir -p "$dir"
	deepen=()
	[ -n "$size" ] && deepen=(--size "$size" --deepen)
	log "phase $run"
	"$PY" -m train.chattts.train gpt --feats "$work/feats" --out "$work/gpt-$(name "$run")" --init "$start" "${deepen[@]}" \
		$COMMON $BATCH --sched-sampling 0.8 --sched-passes 2 --sched-temperature 0.3 --epochs 200 --lr "$lr" \
		--warmup 100 --weight-decay 0.01 --time-budget-s "$seconds" --log-interval 25 --val-interval 400 \
		--save-interval 400 --keep-checkpoints 2 --seed 52 ${GPU_FLAGS:-} > "$dir/gpt.log" 2>&1 &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
for run in $RUNS; do
	dir="$out/$(name "$run")"
	last=$(ls "$work/gpt-$(name "$run")"/ckpt-*.pt 2>/dev/null | tail -1 || true)
	if [ -z "$last" ]; then
		log "$run: no checkpoint"
		tail -20 "$dir/gpt.log"
		continue
	fi
	log "merge $last"
	"$PY" -m train.chattts.train merge --feats "$work/feats" --checkpoint "$last" --split-mb 15 --out "$dir/model"
	grep '"event": "val"' "$dir/gpt.log" | tail -2 | tee -a "$out/steps.log" || true
done
log "done (exit $rc)"
exit "$rc"
