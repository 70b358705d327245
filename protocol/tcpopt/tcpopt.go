// Package tcpopt sets the socket options of the long-lived TCP links
// between Fjord nodes (raft between voters, a broker's requests to the
// active controller), which must notice a dead path quickly.
//
// Why: a link whose packets vanish (a partition, a pulled cable, a
// firewall's DROP) gives no error. The sender's kernel keeps the unsent
// bytes and retransmits them with an exponential backoff for about
// fifteen minutes (tcp_retries2) before it gives up; writes meanwhile
// succeed into the socket buffer. Once the path heals, the connection
// resumes only at its next retransmission, which after a partition of
// ten seconds is several seconds away, after thirty seconds up to half a
// minute: raft heartbeats sat in such a connection, and the voter behind
// it learned of its leader that much later. TCP_USER_TIMEOUT (RFC 5482)
// bounds how long sent data may stay unacknowledged before the kernel
// closes the connection, so the sender redials and a fresh connection
// works as soon as the path does.
package tcpopt

import (
	"net"
	"time"
)

// UserTimeout is the bound the links use: well above a round trip on any
// network a cluster spans (a delayed path of several hundred
// milliseconds keeps its connections), well below the time a healed
// partition may take to serve again.
const UserTimeout = 2 * time.Second

// netConner is what a connection wrapping a TCP one (a TLS connection)
// gives access to.
type netConner interface{ NetConn() net.Conn }

// tcp finds the TCP connection under c, nil if there is none.
func tcp(c net.Conn) *net.TCPConn {
	for i := 0; i < 4 && c != nil; i++ {
		if t, ok := c.(*net.TCPConn); ok {
			return t
		}
		w, ok := c.(netConner)
		if !ok {
			return nil
		}
		c = w.NetConn()
	}
	return nil
}

// SetUserTimeout sets TCP_USER_TIMEOUT to d on the TCP connection under
// c (a *net.TCPConn, or a TLS connection over one). It is a no-op where
// the option does not exist (not Linux) or c is not TCP; the error is
// the system's refusal.
func SetUserTimeout(c net.Conn, d time.Duration) error {
	t := tcp(c)
	if t == nil {
		return nil
	}
	return setUserTimeout(t, d)
}

// UserTimeoutOf reads TCP_USER_TIMEOUT back (0: the system default, or
// the option does not exist here).
func UserTimeoutOf(c net.Conn) (time.Duration, error) {
	t := tcp(c)
	if t == nil {
		return 0, nil
	}
	return userTimeoutOf(t)
}
