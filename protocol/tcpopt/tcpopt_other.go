//go:build !linux

package tcpopt

import (
	"net"
	"time"
)

func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }

func userTimeoutOf(*net.TCPConn) (time.Duration, error) { return 0, nil }
