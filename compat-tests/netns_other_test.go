//go:build !linux

package compattests

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"testing"
)

// netNS: network namespaces are Linux's; elsewhere the tests needing one
// skip (netns_linux_test.go).
type netNS struct{ name string }

var errNoNetNS = errors.New("network namespaces are Linux only")

func netnsUsable() error { return errNoNetNS }

func newNetNS(t testing.TB) *netNS {
	t.Helper()
	requireNetNS(t)
	t.Fatalf("newNetNS: %v", errNoNetNS)
	return nil
}

func (ns *netNS) Name() string { return ns.name }

func (ns *netNS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command(name, args...)
}

func (ns *netNS) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, errNoNetNS
}
