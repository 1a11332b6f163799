package assets

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"
)

const benchSize = 64 << 20

// BenchmarkDownload pulls a 64 MiB file from a local server through the whole pipeline
// (probe, 4 ranged parts, resume record, sha256 verification, rename) and, in the same run,
// with a plain single-stream GET + io.Copy to a file. It reports both throughputs and their
// ratio (parley/iocopy; 1.0 = as fast as the bare copy).
func BenchmarkDownload(b *testing.B) {
	srv := newFaultServer(b)
	data := randomBytes(benchSize, 20)
	url := srv.add("/big", data)
	root := b.TempDir()
	var tParley, tCopy time.Duration
	b.SetBytes(benchSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := filepath.Join(root, "run")
		os.RemoveAll(dir)
		reg, _ := newRegistry([]*Model{oneFileModel("m", url, benchSize, sha(data))}, embedSource{fsys: fstest.MapFS{}})
		mgr, _ := NewManager(reg, Options{Dir: dir, CacheDir: filepath.Join(root, "cache")})
		b.StartTimer()

		t0 := time.Now()
		if err := mgr.Pull(context.Background(), "m"); err != nil {
			b.Fatal(err)
		}
		tParley += time.Since(t0)

		t0 = time.Now()
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		f, _ := os.Create(filepath.Join(root, "copy"))
		if _, err := io.Copy(f, resp.Body); err != nil {
			b.Fatal(err)
		}
		f.Sync()
		f.Close()
		resp.Body.Close()
		tCopy += time.Since(t0)
	}
	mb := float64(benchSize) * float64(b.N) / (1 << 20)
	b.ReportMetric(mb/tParley.Seconds(), "parley_MiB/s")
	b.ReportMetric(mb/tCopy.Seconds(), "iocopy_MiB/s")
	b.ReportMetric(tCopy.Seconds()/tParley.Seconds(), "parley/iocopy")
}

// BenchmarkHashOverhead measures what verification costs a pull, in the same run: the same
// pull with sha256 (hashed along the transfer, then checked) and with hashing switched off;
// hash_overhead is (with - without) / without. "loopback" is CPU-bound (server, client and
// hash share the cores); "throttled" paces the server (~1 ms per 32 KiB per connection) like a
// network link, where hashing along the transfer should hide behind the wait. sha256_MiB/s is
// a bare hash pass over the file for scale.
func BenchmarkHashOverhead(b *testing.B) {
	for _, bc := range []struct {
		name     string
		size     int
		throttle time.Duration
	}{
		{"loopback", benchSize, 0},
		{"throttled", 16 << 20, time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := newFaultServer(b)
			data := randomBytes(bc.size, 21)
			url := srv.add("/big", data)
			srv.set(func(s *faultServer) { s.throttle = bc.throttle })
			root := b.TempDir()
			var tWith, tWithout, tHash time.Duration
			pull := func(noHash bool) time.Duration {
				dir := filepath.Join(root, "run")
				os.RemoveAll(dir)
				reg, _ := newRegistry([]*Model{oneFileModel("m", url, int64(bc.size), sha(data))}, embedSource{fsys: fstest.MapFS{}})
				// 1 MiB chunks give the file/chunk ratio of a real model (hundreds of MB in
				// 8 MiB chunks), which is what decides how much hashing is left at the end.
				mgr, _ := NewManager(reg, Options{Dir: dir, CacheDir: filepath.Join(root, "cache"), MinPartSize: 1 << 20})
				mgr.benchNoHash = noHash
				t0 := time.Now()
				if err := mgr.Pull(context.Background(), "m"); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			b.SetBytes(int64(bc.size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tWithout += pull(true)
				tWith += pull(false)
				t0 := time.Now()
				if _, _, err := hashFile(context.Background(), filepath.Join(root, "run", "m", "model.onnx"), nil); err != nil {
					b.Fatal(err)
				}
				tHash += time.Since(t0)
			}
			b.ReportMetric((tWith.Seconds()-tWithout.Seconds())/tWithout.Seconds(), "hash_overhead")
			b.ReportMetric(float64(bc.size)*float64(b.N)/(1<<20)/tHash.Seconds(), "sha256_MiB/s")
		})
	}
}
