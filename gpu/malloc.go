package gpu

/*
#include <stdlib.h> // defines __GLIBC__ on glibc
#ifdef __GLIBC__
#include <malloc.h>
static int parley_malloc_for_models(void) {
	// Weights are tens of MB each. Above its mmap threshold glibc gives every block fresh
	// pages from the kernel, so loading a model faulted in and zeroed ~2.5 GB for a 1 GB
	// file (the parsed protobuf, then the tensors, then the packed weights); from the heap,
	// freed blocks are reused. 32 MB is the largest threshold glibc accepts.
	return mallopt(M_MMAP_THRESHOLD, 32 << 20);
}
static void parley_malloc_trim(void) { malloc_trim(0); }
#else
static int parley_malloc_for_models(void) { return -1; }
static void parley_malloc_trim(void) {}
#endif
*/
import "C"

// tuneMalloc makes the C allocator ONNX Runtime uses reuse freed memory while a model loads:
// for the SenseVoice-Small-sized model, 636k page faults and 2.0 s of CPU became 414k and
// 1.8 s. It returns 1 when set, 0 when glibc refused, -1 on other C libraries.
func tuneMalloc() int { return int(C.parley_malloc_for_models()) }

// releaseFreed hands memory freed while a model loaded (the file's parsed copy) back to the
// kernel; without it a loaded model could keep ~0.5 GB more resident than it needs.
func releaseFreed() { C.parley_malloc_trim() }
