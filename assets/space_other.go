//go:build !unix

package assets

import "errors"

// freeSpace is unknown here; the check is skipped (write errors still stop the download).
func freeSpace(string) (uint64, error) { return 0, errors.New("free space unknown on this system") }
