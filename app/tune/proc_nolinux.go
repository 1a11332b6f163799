//go:build unix && !linux

package tune

import "syscall"

func setDeathSignal(*syscall.SysProcAttr) {}
