package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// serveKfakeArg, as the only argument, turns this program into a kfake
// server: the benchmark re-executes itself that way so that kfake runs in
// a process of its own, like a real broker, and its CPU time can be read
// apart from the clients'. Not a documented flag: only the tool uses it.
const serveKfakeArg = "-serve-kfake"

// kfakeReady prefixes the line a kfake child prints once it listens.
const kfakeReady = "kfake listening on "

// serveKfake runs one kfake broker on a random loopback port, prints its
// address, and serves until stdin closes (the parent went away) or a
// signal arrives.
func serveKfake() int {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fjord-bench -serve-kfake:", err)
		return 1
	}
	defer c.Close()
	fmt.Printf("%s%s\n", kfakeReady, strings.Join(c.ListenAddrs(), ","))
	eof := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(eof) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case <-eof:
	case <-sig:
	}
	return 0
}

// kfakeProc is a kfake child process this tool started.
type kfakeProc struct {
	cmd   *exec.Cmd
	addr  string
	stdin io.WriteCloser
	done  chan struct{}
}

// startKfake re-executes this binary as a kfake server and waits for its
// address.
func startKfake(ctx context.Context) (*kfakeProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to run kfake: %w", err)
	}
	p := &kfakeProc{cmd: exec.Command(self, serveKfakeArg), done: make(chan struct{})}
	p.cmd.Stderr = os.Stderr
	p.cmd.SysProcAttr = childSysProcAttr()
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kfake child: %w", err)
	}
	kfakeChildren.add(p)
	go func() { p.cmd.Wait(); close(p.done) }()

	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-line:
		addr, found := strings.CutPrefix(l, kfakeReady)
		if !ok || !found || addr == "" {
			p.stop()
			return nil, fmt.Errorf("kfake child did not report an address (got %q)", l)
		}
		p.addr = strings.Split(addr, ",")[0]
	case <-time.After(startupWait):
		p.stop()
		return nil, fmt.Errorf("kfake child silent for %s", startupWait)
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
	return p, nil
}

func (p *kfakeProc) pid() int { return p.cmd.Process.Pid }

// stop closes the child's stdin (it exits on EOF), kills it if it has not
// gone within 5 s, and waits for it.
func (p *kfakeProc) stop() {
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	kfakeChildren.remove(p)
}

// kfakeChildren lets the watchdog kill kfake children too.
var kfakeChildren = kfakeSet{m: map[*kfakeProc]bool{}}

type kfakeSet struct{ m map[*kfakeProc]bool }

func (s *kfakeSet) add(p *kfakeProc) {
	childrenMu.Lock()
	defer childrenMu.Unlock()
	s.m[p] = true
}

func (s *kfakeSet) remove(p *kfakeProc) {
	childrenMu.Lock()
	defer childrenMu.Unlock()
	delete(s.m, p)
}
