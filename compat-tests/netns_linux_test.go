package compattests

// Private network namespaces, for tests whose clients hard-code addresses
// (segmentio/kafka-go's own suite dials localhost:9092): inside a
// namespace of its own a node may listen on 9092 whatever runs on the
// host. Processes enter it through `ip netns exec`; the test process
// itself reaches it through netNS.DialContext.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns add` mounts the namespaces it names.
const netnsDir = "/var/run/netns"

// netnsPrefix starts the name of every namespace the tests make; the
// creating test process's pid follows, so parallel runs cannot clash and
// a namespace left by a dead run can be recognised.
const netnsPrefix = "fjord-compat-"

var netnsSeq atomic.Int64

// netNS is a network namespace named by `ip netns`, with only its
// loopback interface (up): 127.0.0.1 and ::1 of its own.
type netNS struct {
	name string
	// fd is the namespace, held open for setns(2) by DialContext.
	fd *os.File
}

// newNetNS makes a private network namespace, deleted when t ends. When
// it cannot (not root, no `ip`, no kernel support) the test is skipped
// with the reason, or fails if FJORD_REQUIRE_NETNS is set.
func newNetNS(t testing.TB) *netNS {
	t.Helper()
	requireNetNS(t)
	sweepStaleNetNS(t)
	name := fmt.Sprintf("%s%d-%d", netnsPrefix, os.Getpid(), netnsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	ns := &netNS{name: name}
	t.Cleanup(func() {
		if ns.fd != nil {
			ns.fd.Close()
		}
		// Processes still inside keep the namespace alive; the name goes.
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v: %s", name, err, out)
		}
	})
	if out, err := ns.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("bringing up lo in %s: %v: %s", name, err, out)
	}
	f, err := os.Open(filepath.Join(netnsDir, name))
	if err != nil {
		t.Fatalf("opening namespace %s: %v", name, err)
	}
	ns.fd = f
	return ns
}

// netnsUsable says why network namespaces cannot be made here, or nil.
func netnsUsable() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root (euid %d)", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("no ip command (iproute2): %w", err)
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("kernel without network namespaces: %w", err)
	}
	return nil
}

// sweepStaleNetNS deletes the namespaces of test runs whose process is
// gone (killed before its clean-up ran), and ends the processes still in
// them, so they do not pile up.
func sweepStaleNetNS(t testing.TB) {
	entries, err := os.ReadDir(netnsDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), netnsPrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue // its creator still runs (or the pid was reused)
		}
		// Its fjord processes outlived the run (killed before its
		// clean-up): end them, or they would live on in the namespace
		// once its name is gone.
		if out, err := exec.Command("ip", "netns", "pids", e.Name()).Output(); err == nil {
			for _, f := range strings.Fields(string(out)) {
				if p, err := strconv.Atoi(f); err == nil && p > 1 {
					_ = syscall.Kill(p, syscall.SIGKILL)
					t.Logf("killed process %d left in stale namespace %s", p, e.Name())
				}
			}
		}
		if out, err := exec.Command("ip", "netns", "delete", e.Name()).CombinedOutput(); err != nil {
			t.Logf("deleting stale namespace %s: %v: %s", e.Name(), err, out)
		} else {
			t.Logf("deleted stale namespace %s (its test process %d is gone)", e.Name(), pid)
		}
	}
}

// Name is the namespace's `ip netns` name.
func (ns *netNS) Name() string { return ns.name }

// Command is exec.Command run inside the namespace. `ip netns exec`
// execs the program in place, so the returned command's process is the
// program itself: signals reach it directly.
func (ns *netNS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.name, name}, args...)...)
}

// Listen listens on addr (tcp) inside the namespace: the socket is made
// by a thread that entered it, like DialContext's.
func (ns *netNS) Listen(addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see DialContext
		if err := unix.Setns(int(ns.fd.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("netns %s: setns: %w", ns.name, err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		done <- result{ln, err}
	}()
	r := <-done
	return r.ln, r.err
}

// DialContext dials addr from inside the namespace. A socket belongs to
// the namespace of the thread that created it, and keeps it wherever it
// is used after: so each dial runs on a goroutine locked to an OS thread
// that enters the namespace and is never unlocked (the runtime ends the
// thread with the goroutine rather than reuse it in the wrong namespace).
// Names are resolved first (from /etc/hosts for localhost) and the
// addresses dialed one by one on that thread: net.Dialer would race two
// address families on other goroutines, outside the namespace.
func (ns *netNS) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("netns %s: dial %s: %w", ns.name, addr, err)
	}
	ips := []string{host}
	if net.ParseIP(host) == nil {
		if ips, err = net.DefaultResolver.LookupHost(ctx, host); err != nil {
			return nil, fmt.Errorf("netns %s: dial %s: %w", ns.name, addr, err)
		}
	}
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := unix.Setns(int(ns.fd.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("netns %s: setns: %w", ns.name, err)}
			return
		}
		var d net.Dialer
		var errs []error
		for _, ip := range ips {
			c, err := d.DialContext(ctx, network, net.JoinHostPort(ip, port))
			if err == nil {
				done <- result{conn: c}
				return
			}
			errs = append(errs, err)
		}
		done <- result{err: fmt.Errorf("netns %s: %w", ns.name, errors.Join(errs...))}
	}()
	r := <-done
	return r.conn, r.err
}
