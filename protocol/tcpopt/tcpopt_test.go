package tcpopt

import (
	"crypto/tls"
	"net"
	"runtime"
	"testing"
	"time"
)

// The option lands on a plain TCP connection and on the one under a TLS
// client connection.
func TestSetUserTimeout(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_USER_TIMEOUT is Linux's")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d, err := UserTimeoutOf(c); err != nil || d != 0 {
		t.Fatalf("before: %v, %v; want the default 0", d, err)
	}
	if err := SetUserTimeout(c, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d, err := UserTimeoutOf(c); err != nil || d != 1500*time.Millisecond {
		t.Fatalf("after: %v, %v; want 1.5s", d, err)
	}
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true})
	if err := SetUserTimeout(tc, UserTimeout); err != nil {
		t.Fatal(err)
	}
	if d, _ := UserTimeoutOf(c); d != UserTimeout {
		t.Fatalf("through TLS: %v, want %v", d, UserTimeout)
	}
	// Not TCP: nothing to do, no error.
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if err := SetUserTimeout(a, time.Second); err != nil {
		t.Fatalf("pipe: %v", err)
	}
}
