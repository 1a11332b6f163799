package gui

import (
	"net"
	"path/filepath"
	"reflect"
	"testing"
)

func TestBusAddresses(t *testing.T) {
	tests := []struct {
		in   string
		want []busAddr
	}{
		{"unix:path=/run/user/1000/bus", []busAddr{{"unix", "/run/user/1000/bus"}}},
		{"unix:abstract=/tmp/dbus-AbC,guid=0123", []busAddr{{"unix", "@/tmp/dbus-AbC"}}},
		{"unix:path=/tmp/a%20b;tcp:host=localhost,port=4000", []busAddr{{"unix", "/tmp/a b"}, {"tcp", "localhost:4000"}}},
		{"disabled:", nil},
		{"", nil},
		{"unix:guid=only", nil},
		{"tcp:host=h", nil},
	}
	for _, tc := range tests {
		if got := busAddresses(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("busAddresses(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestSessionBus: a listening socket at DBUS_SESSION_BUS_ADDRESS (or $XDG_RUNTIME_DIR/bus)
// is a session bus; none, or a dead one, is not (and the app then has no tray).
func TestSessionBus(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "bus")
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", dir)
	if sessionBus() {
		t.Error("a bus without a socket")
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Skip("unix sockets:", err)
	}
	if !sessionBus() {
		t.Error("the socket in XDG_RUNTIME_DIR is not found")
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(dir, "elsewhere"))
	if sessionBus() {
		t.Error("DBUS_SESSION_BUS_ADDRESS names a dead socket, yet a bus is found")
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+sock)
	if !sessionBus() {
		t.Error("DBUS_SESSION_BUS_ADDRESS's socket is not found")
	}
	l.Close()
}

func FuzzBusAddresses(f *testing.F) {
	for _, s := range []string{"unix:path=/run/user/1000/bus", "unix:abstract=/tmp/x,guid=1;tcp:host=h,port=1", ":::", ";;", "unix:path=%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, a := range busAddresses(s) {
			if a.network != "unix" && a.network != "tcp" || a.addr == "" {
				t.Fatalf("%q gave %+v", s, a)
			}
		}
	})
}
