package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
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

// touchFreshPages maps size bytes of anonymous memory, writes one byte
// into each page, and returns how long that took per page: the cost of
// faulting in a fresh page.
func touchFreshPages(size int) (time.Duration, error) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return 0, err
	}
	defer syscall.Munmap(b)
	pg := os.Getpagesize()
	start := time.Now()
	for i := 0; i < len(b); i += pg {
		b[i] = 1
	}
	return time.Since(start) / time.Duration(len(b)/pg), nil
}

// syncfsNumber is syncfs(2)'s system call number by architecture: the
// frozen syscall package predates it, and this module does without
// golang.org/x/sys.
var syncfsNumber = map[string]uintptr{"amd64": 306, "arm64": 267, "riscv64": 267, "loong64": 267, "386": 344, "arm": 373, "ppc64le": 348, "ppc64": 348, "s390x": 348}

// syncfs writes back and flushes the whole file system f is on.
func syncfs(f *os.File) error {
	nr, ok := syncfsNumber[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("syncfs on %s: %w", runtime.GOARCH, errors.ErrUnsupported)
	}
	if _, _, errno := syscall.Syscall(nr, f.Fd(), 0, 0); errno != 0 {
		return fmt.Errorf("syncfs: %w", errno)
	}
	return nil
}
