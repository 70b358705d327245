package main

import (
	"os"
	"syscall"
)

// childSysProcAttr makes the kernel kill a fjord child if this process
// dies, so no broker outlives the benchmark.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// groupSysProcAttr is childSysProcAttr in a process group of the
// child's own (weed mini), so stopping it can signal the whole group.
func groupSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// preallocate reserves size bytes for f (fallocate, keeping no hole), so
// that writes within them do not change its size.
func preallocate(f *os.File, size int64) error {
	return syscall.Fallocate(int(f.Fd()), 0, 0, size)
}

// fdatasync flushes f's data and only the metadata needed to read it.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
