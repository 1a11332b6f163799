// Package chattts runs ChatTTS (2noise/ChatTTS) exported to ONNX by Parley's exporter
// (train/chattts) with ChatTTS's own semantics, so its controls are native:
//
//	text ─► ChatTTS text rules ─► WordPiece (tokenizer.json) with [uv_break] [laugh] [break_N] …
//	     ─► prompt [Stts][spk_emb][speed_N] … [Ptts] (speaker vector at [spk_emb])
//	     ─► GPT prefill + KV-cached steps, 4 code streams sampled the ChatTTS way
//	     ─► hidden states ─► decoder (mel) ─► Vocos (magnitude, phase) ─► ISTFT ─► 24 kHz PCM
//
// Sampling follows ChatTTS's gen_logits and GPT.generate exactly (temperature per stream,
// repetition penalty over the last 16 tokens, top-P then top-K keeping at least 3, EOS masked
// before the minimum length), drawing from a seeded PCG generator that belongs to one decode,
// so a seed, a text and settings give bit-identical audio in any process.
package chattts
