package gpu

import "testing"

// The allocator setting that makes model loads reuse memory takes effect (it once compiled
// to nothing because the glibc check came before any libc header).
func TestTuneMalloc(t *testing.T) {
	switch tuneMalloc() {
	case -1:
		t.Skip("not glibc")
	case 0:
		t.Error("glibc refused M_MMAP_THRESHOLD = 32 MB")
	}
}
