//go:build !linux

package main

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// childSysProcAttr has nothing to add off Linux; the watchdog and stop()
// still end the child. (Memory sampling reads /proc and is Linux-only.)
func childSysProcAttr() *syscall.SysProcAttr { return nil }

// groupSysProcAttr puts the child in a process group of its own.
func groupSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// preallocate writes nothing off Linux: the floor is then taken on a file
// that grows.
func preallocate(*os.File, int64) error { return nil }

// fdatasync is fsync off Linux.
func fdatasync(f *os.File) error { return f.Sync() }

// touchFreshPages is not measured off Linux.
func touchFreshPages(int) (time.Duration, error) { return 0, errors.ErrUnsupported }

// syncfs is not offered off Linux.
func syncfs(*os.File) error { return errors.ErrUnsupported }
