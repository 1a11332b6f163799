package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// OrtApiBase has been two function pointers since ONNX Runtime 1.0 and is the one part of the
// C API that is stable across versions, so we can read the version of any library with it
// before handing the library to the binding (which asks for one exact API version).
typedef struct {
	const void* (*GetApi)(unsigned int version);
	const char* (*GetVersionString)(void);
} parleyOrtApiBase;
typedef const parleyOrtApiBase* (*parleyGetApiBase)(void);

static int parley_ort_probe(const char* path, char* version, size_t vlen, char* err, size_t elen,
                            unsigned int api, int* has_api) {
	void* h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		const char* e = dlerror();
		strncpy(err, e ? e : "dlopen failed", elen - 1);
		return -1;
	}
	parleyGetApiBase get = (parleyGetApiBase)dlsym(h, "OrtGetApiBase");
	if (!get) {
		strncpy(err, "no OrtGetApiBase symbol: not an ONNX Runtime library", elen - 1);
		dlclose(h);
		return -1;
	}
	const parleyOrtApiBase* base = get();
	const char* v = base && base->GetVersionString ? base->GetVersionString() : NULL;
	strncpy(version, v ? v : "unknown", vlen - 1);
	*has_api = base && base->GetApi && base->GetApi(api) != NULL;
	// The library stays mapped: the binding loads the same file next, and unloading ORT
	// while its static state lives is unsafe.
	return 0;
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

// probeLibrary loads the shared library at path and reports its version string and whether
// it provides the C API version the binding needs.
func probeLibrary(path string, api uint) (version string, hasAPI bool, err error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var vbuf [64]C.char
	var ebuf [512]C.char
	var has C.int
	if C.parley_ort_probe(cpath, &vbuf[0], C.size_t(len(vbuf)), &ebuf[0], C.size_t(len(ebuf)), C.uint(api), &has) != 0 {
		return "", false, errors.New(C.GoString(&ebuf[0]))
	}
	return C.GoString(&vbuf[0]), has != 0, nil
}
