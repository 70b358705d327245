package tcpopt

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

func setUserTimeout(c *net.TCPConn, d time.Duration) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	}); err != nil {
		return err
	}
	return serr
}

func userTimeoutOf(c *net.TCPConn) (time.Duration, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var ms int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		ms, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	}); err != nil {
		return 0, err
	}
	return time.Duration(ms) * time.Millisecond, serr
}
