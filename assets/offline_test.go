package assets

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Without network a pull fails with one line: the model, that the network is unreachable,
// and exactly which files to fetch elsewhere for `parley models import`.
func TestPullOffline(t *testing.T) {
	m := &Model{ID: "sv", Kind: KindASR, Files: []File{
		{Path: "model.int8.onnx", URLs: []string{"hf://someone/sense-voice/model.int8.onnx", "https://mirror.example/model.int8.onnx"}, Size: 10},
		{Path: "tokens.txt", URLs: []string{"hf://someone/sense-voice/tokens.txt"}, Size: 3},
	}, Archives: []Archive{{URLs: []string{"https://github.com/someone/releases/sv.tar.bz2"}}}}
	te := newTestEnv(t, []*Model{m}, nil, func(o *Options) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
		}
		o.Client = &http.Client{Transport: tr}
	})
	err := te.mgr.Pull(context.Background(), "sv")
	var off *OfflineError
	if !errors.Is(err, ErrOffline) || !errors.As(err, &off) {
		t.Fatalf("Pull = %v, want an OfflineError", err)
	}
	msg := err.Error()
	for _, want := range []string{"sv: ", "network is unreachable", "huggingface.co", "no such host",
		"https://huggingface.co/someone/sense-voice/resolve/main/model.int8.onnx",
		"https://huggingface.co/someone/sense-voice/resolve/main/tokens.txt",
		"https://github.com/someone/releases/sv.tar.bz2", "parley models import"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("message is more than one line:\n%s", msg)
	}
}

// A pull that reached a server and failed there is not "offline".
func TestPullServerErrorIsNotOffline(t *testing.T) {
	srv := newFaultServer(t)
	m := &Model{ID: "m", Kind: KindASR, Files: []File{{Path: "a", URLs: []string{srv.URL + "/missing"}, Size: 10}}}
	te := newTestEnv(t, []*Model{m}, srv, nil)
	if err := te.mgr.Pull(context.Background(), "m"); err == nil || errors.Is(err, ErrOffline) {
		t.Fatalf("Pull = %v, want a failure that is not ErrOffline", err)
	}
}
