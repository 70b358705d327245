//go:build !linux

package main

import "syscall"

// childSysProcAttr has nothing to add off Linux; the watchdog and stop()
// still end the child. (Memory sampling reads /proc and is Linux-only.)
func childSysProcAttr() *syscall.SysProcAttr { return nil }
