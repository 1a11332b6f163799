//go:build unix

package tune

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// setProcessGroup puts the trainer in its own process group (so cancelling reaches the
// launcher and every rank) and, on Linux, has the kernel stop it if Parley dies.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
}

// signalGroup sends SIGTERM (or SIGKILL) to the trainer's process group.
func signalGroup(cmd *exec.Cmd, kill bool) {
	if cmd.Process == nil {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		cmd.Process.Signal(sig)
	}
}

// processStart is the kernel's start time of pid (clock ticks since boot; 0 when unknown), so
// a recycled pid is not taken for the job's process.
func processStart(pid int) uint64 {
	_, start := procStat(pid)
	return start
}

// procStat reads a process's state letter and start time from /proc (0, 0 when unreadable).
func procStat(pid int) (state byte, start uint64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(s[i+1:])
	// after the name: state is field 3 (f[0]), starttime field 22 (f[19])
	if len(f) < 20 || len(f[0]) == 0 {
		return 0, 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return f[0][0], v
}

// processAlive says whether pid runs (a zombie does not) and is the process that started at
// start (0 = any).
func processAlive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	state, now := procStat(pid)
	if state == 'Z' || state == 'X' {
		return false
	}
	return start == 0 || now == 0 || now == start
}
