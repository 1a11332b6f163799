package device

/*
#cgo pkg-config: alsa jack
#include <alsa/asoundlib.h>
#include <jack/jack.h>

// ALSA and JACK print every probe PortAudio makes (missing cards, no JACK server) straight to
// stderr, which buries Parley's own output on machines without a sound card. These handlers
// drop those messages; Parley reports what matters (no device, device lost) itself.
static void parley_alsa_silent(const char *file, int line, const char *func, int err, const char *fmt, ...) {}
static void parley_jack_silent(const char *msg) {}

static void parley_quiet_native_audio(void) {
	snd_lib_error_set_handler(parley_alsa_silent);
	jack_set_error_function(parley_jack_silent);
	jack_set_info_function(parley_jack_silent);
}
*/
import "C"

import (
	"context"
	"log/slog"
	"os"
)

// quietNativeAudio silences ALSA's and JACK's own diagnostics unless debug logging is on.
// JACK_NO_START_SERVER keeps PortAudio's JACK probe from trying to launch a JACK server.
func quietNativeAudio(log *slog.Logger) {
	if log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	if os.Getenv("JACK_NO_START_SERVER") == "" {
		os.Setenv("JACK_NO_START_SERVER", "1")
	}
	C.parley_quiet_native_audio()
}
