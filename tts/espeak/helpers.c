// C side of the espeak package: initialisation with the synth callback, synthesis of one
// text, and clause-by-clause IPA phonemes. Kept in a .c file because the Go file exports a
// callback (cgo then allows only declarations in its preamble).
#include <stdlib.h>
#include <espeak-ng/speak_lib.h>
#include "_cgo_export.h"

int parley_init(void) {
	// 40 ms callback buffers: cancellation is checked at least that often.
	int rate = espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 40, NULL, espeakINITIALIZE_DONT_EXIT);
	if (rate > 0) espeak_SetSynthCallback((t_espeak_callback *)parleySynthCallback);
	return rate;
}

int parley_synth(const char *text, size_t size) {
	return espeak_Synth(text, size, 0, POS_CHARACTER, 0, espeakCHARS_UTF8, NULL, NULL);
}

const char *parley_next_phonemes(const void **p) {
	return espeak_TextToPhonemes(p, espeakCHARS_UTF8, espeakPHONEMES_IPA);
}
