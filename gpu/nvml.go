package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// NVML is loaded at run time so that Parley has no link-time dependency on the NVIDIA
// driver: a machine without it simply has no GPUs. Only the handful of entry points we use
// are declared here; their signatures are stable across driver versions.
typedef int (*nvmlInit_t)(void);
typedef int (*nvmlShutdown_t)(void);
typedef int (*nvmlCount_t)(unsigned int*);
typedef int (*nvmlHandle_t)(unsigned int, void**);
typedef int (*nvmlName_t)(void*, char*, unsigned int);
typedef struct { unsigned long long total, free, used; } parleyNvmlMemory;
typedef int (*nvmlMem_t)(void*, parleyNvmlMemory*);
typedef int (*nvmlDriver_t)(char*, unsigned int);
typedef int (*nvmlCuda_t)(int*);
typedef const char* (*nvmlErr_t)(int);

typedef struct {
	unsigned int index; // NVML's index, which CUDA_VISIBLE_DEVICES-free CUDA uses too
	char name[96];
	unsigned long long total, free;
} parleyGPU;

typedef struct {
	int count;
	parleyGPU gpus[16];
	char driver[80];
	int cuda;
	char err[256];
} parleyNvmlReport;

static void *parley_nvml_open(void) {
	void *h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h) h = dlopen("libnvidia-ml.so", RTLD_LAZY | RTLD_LOCAL);
	return h;
}

// Returns 0 with a filled report, 1 when NVML is absent, -1 on an NVML error (report.err).
static int parley_nvml_query(parleyNvmlReport *r) {
	memset(r, 0, sizeof(*r));
	void *h = parley_nvml_open();
	if (!h) return 1;
	nvmlInit_t init = (nvmlInit_t)dlsym(h, "nvmlInit_v2");
	nvmlShutdown_t shutdown = (nvmlShutdown_t)dlsym(h, "nvmlShutdown");
	nvmlCount_t count = (nvmlCount_t)dlsym(h, "nvmlDeviceGetCount_v2");
	nvmlHandle_t handle = (nvmlHandle_t)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	nvmlName_t name = (nvmlName_t)dlsym(h, "nvmlDeviceGetName");
	nvmlMem_t mem = (nvmlMem_t)dlsym(h, "nvmlDeviceGetMemoryInfo");
	nvmlDriver_t driver = (nvmlDriver_t)dlsym(h, "nvmlSystemGetDriverVersion");
	nvmlCuda_t cuda = (nvmlCuda_t)dlsym(h, "nvmlSystemGetCudaDriverVersion_v2");
	nvmlErr_t errstr = (nvmlErr_t)dlsym(h, "nvmlErrorString");
	if (!init || !shutdown || !count || !handle) {
		strncpy(r->err, "libnvidia-ml lacks the NVML v2 entry points", sizeof(r->err) - 1);
		dlclose(h);
		return -1;
	}
	int rc = init();
	if (rc != 0) {
		strncpy(r->err, errstr ? errstr(rc) : "nvmlInit failed", sizeof(r->err) - 1);
		dlclose(h);
		return -1;
	}
	unsigned int n = 0;
	rc = count(&n);
	if (rc != 0) {
		strncpy(r->err, errstr ? errstr(rc) : "nvmlDeviceGetCount failed", sizeof(r->err) - 1);
		shutdown();
		dlclose(h);
		return -1;
	}
	if (n > 16) n = 16;
	for (unsigned int i = 0; i < n; i++) {
		void *dev = NULL;
		if (handle(i, &dev) != 0) continue;
		parleyGPU *g = &r->gpus[r->count++];
		g->index = i;
		if (name) name(dev, g->name, sizeof(g->name));
		parleyNvmlMemory m;
		if (mem && mem(dev, &m) == 0) { g->total = m.total; g->free = m.free; }
	}
	if (driver) driver(r->driver, sizeof(r->driver));
	if (cuda) cuda(&r->cuda);
	shutdown();
	dlclose(h);
	return 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
)

// Device is one NVIDIA GPU as NVML reports it.
type Device struct {
	Index       int
	Name        string
	MemoryTotal uint64 // bytes
	MemoryFree  uint64 // bytes
}

// GPUReport is what device discovery found. No NVML library, or NVML without devices, is a
// normal answer (Devices empty, Reason says why), not an error.
type GPUReport struct {
	Devices       []Device
	DriverVersion string
	CUDAVersion   string // highest CUDA version the driver supports, e.g. "12.4"
	Reason        string // why there are no devices, when there are none
}

// ErrNVML is returned when NVML is present but fails.
var ErrNVML = errors.New("NVML error")

// DiscoverGPUs asks NVML (loaded at run time) for NVIDIA devices.
func DiscoverGPUs() (GPUReport, error) {
	var r C.parleyNvmlReport
	switch C.parley_nvml_query(&r) {
	case 1:
		return GPUReport{Reason: "no NVIDIA driver (libnvidia-ml.so.1 not found)"}, nil
	case -1:
		msg := C.GoString(&r.err[0])
		// A driver library without a usable device (container without GPUs, driver/library
		// mismatch) is still "no GPU" for the user, but worth reporting.
		return GPUReport{Reason: "NVIDIA driver present but unusable: " + msg}, fmt.Errorf("%w: %s", ErrNVML, msg)
	}
	rep := GPUReport{DriverVersion: C.GoString(&r.driver[0])}
	if r.cuda > 0 {
		rep.CUDAVersion = fmt.Sprintf("%d.%d", int(r.cuda)/1000, int(r.cuda)%1000/10)
	}
	for i := 0; i < int(r.count); i++ {
		g := r.gpus[i]
		rep.Devices = append(rep.Devices, Device{
			Index: int(g.index), Name: C.GoString(&g.name[0]),
			MemoryTotal: uint64(g.total), MemoryFree: uint64(g.free),
		})
	}
	if len(rep.Devices) == 0 {
		rep.Reason = "NVIDIA driver present but no device found"
	}
	return rep, nil
}
