package cli

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"
)

func TestDisplayReachable(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, "X42"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	port := tl.Addr().(*net.TCPAddr).Port
	tcpDisplay := ""
	if port >= 6000 {
		tcpDisplay = "127.0.0.1:" + strconv.Itoa(port-6000)
	}
	tests := []struct {
		display string
		want    bool
	}{
		{":42", true},
		{":42.0", true},
		{"unix:42", true},
		{":43", false},
		{"", false},
		{"nonsense", false},
		{":x", false},
	}
	if tcpDisplay != "" {
		tests = append(tests, struct {
			display string
			want    bool
		}{tcpDisplay, true})
	}
	for _, tc := range tests {
		if got := displayReachable(tc.display, dir); got != tc.want {
			t.Errorf("displayReachable(%q) = %v, want %v", tc.display, got, tc.want)
		}
	}
}
