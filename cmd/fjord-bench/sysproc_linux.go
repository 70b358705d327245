package main

import "syscall"

// childSysProcAttr makes the kernel kill a fjord child if this process
// dies, so no broker outlives the benchmark.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
