package assets

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// recordName is the per-model install record, kept in the model directory.
const recordName = ".parley-model.json"

// modelRecord remembers, per file, the size and sha256 checked at install time and where the
// hash came from ("pinned": the registry; "server": published by the server at first
// download, e.g. Hugging Face's X-Linked-Etag; "download"/"import": computed at first
// download/import, trust on first use; "embedded": the binary). Every verify re-checks it.
type modelRecord struct {
	Files map[string]fileRecord `json:"files"`
}

type fileRecord struct {
	Size   int64     `json:"size"`
	SHA256 string    `json:"sha256"`
	Source string    `json:"source"`
	URL    string    `json:"url,omitempty"`
	Time   time.Time `json:"time"`
}

func loadRecord(dir string) *modelRecord {
	r := &modelRecord{Files: map[string]fileRecord{}}
	data, err := os.ReadFile(filepath.Join(dir, recordName))
	if err != nil {
		return r
	}
	if json.Unmarshal(data, r) != nil || r.Files == nil {
		return &modelRecord{Files: map[string]fileRecord{}}
	}
	return r
}

func (r *modelRecord) set(path string, f fileRecord) { r.Files[path] = f }

func (r *modelRecord) save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("saving install record: %w", err)
	}
	if err := saveJSONAtomic(filepath.Join(dir, recordName), r); err != nil {
		return fmt.Errorf("saving install record: %w", err)
	}
	return nil
}
