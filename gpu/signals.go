package gpu

/*
#include <signal.h>
#include <string.h>

#define PARLEY_NSIG 65
static struct sigaction parley_saved[PARLEY_NSIG];

static void parley_save_signals(void) {
	for (int s = 1; s < PARLEY_NSIG; s++) {
		memset(&parley_saved[s], 0, sizeof(parley_saved[s]));
		sigaction(s, NULL, &parley_saved[s]);
	}
}

// Puts back every handler that changed since parley_save_signals. CUDA libraries install
// their own handlers (without SA_ONSTACK) while the CUDA execution provider initialises,
// which breaks the Go runtime's signal handling; restoring Go's handlers afterwards is the
// workaround onnxruntime_go's maintainers recommend.
static int parley_restore_signals(void) {
	int restored = 0;
	for (int s = 1; s < PARLEY_NSIG; s++) {
		if (s == SIGKILL || s == SIGSTOP) continue;
		struct sigaction now;
		memset(&now, 0, sizeof(now));
		if (sigaction(s, NULL, &now) != 0) continue;
		if (now.sa_handler != parley_saved[s].sa_handler || now.sa_flags != parley_saved[s].sa_flags) {
			sigaction(s, &parley_saved[s], NULL);
			restored++;
		}
	}
	return restored;
}
*/
import "C"

import "sync"

var signalMu sync.Mutex

// withGoSignals runs f, which may initialise native GPU libraries, and then restores the
// process's signal handlers to what they were before. It returns how many were restored.
func withGoSignals(f func() error) (restored int, err error) {
	signalMu.Lock()
	defer signalMu.Unlock()
	C.parley_save_signals()
	err = f()
	return int(C.parley_restore_signals()), err
}
