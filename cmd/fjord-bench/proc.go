package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// startupWait bounds how long a fjord binary may take to answer requests.
const startupWait = 30 * time.Second

// fjordProc is a fjord broker process this tool started.
type fjordProc struct {
	cmd  *exec.Cmd
	addr string // 127.0.0.1:PORT
	// metrics is the node's metrics listener (host:port), "" if it has none.
	metrics string
	dir     string // temp dir: data under data/, output in fjord.log
	log     *os.File
	done    chan struct{} // closed once the process has exited
}

// children lets the watchdog kill a fjord process if the run overstays.
var (
	childrenMu sync.Mutex
	children   = map[*fjordProc]bool{}
	// weedChildren are the weed mini processes (tier.go), killed with
	// their process groups.
	weedChildren = map[*weedProc]bool{}
)

func killChildren() {
	childrenMu.Lock()
	defer childrenMu.Unlock()
	for p := range children {
		p.cmd.Process.Kill()
	}
	for p := range kfakeChildren.m {
		p.cmd.Process.Kill()
	}
	for w := range weedChildren {
		syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// startFjord runs `bin --override listeners=PLAINTEXT://127.0.0.1:PORT
// --override log.dirs=DIR` on a free loopback port with a temp data dir and
// waits until it answers a metadata request.
func startFjord(ctx context.Context, bin string) (*fjordProc, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fjord-bench-")
	if err != nil {
		return nil, err
	}
	metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	p, err := startFjordIn(ctx, bin, dir, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), startupWait,
		"--override", "fjord.metrics.listener="+metrics)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.metrics = metrics
	return p, nil
}

// launchFjord execs bin on dir and addr (see startFjordIn) and returns at
// once, without waiting for the node to answer: the start-up step times
// from here.
func launchFjord(bin, dir, addr string, extra ...string) (*fjordProc, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("fjord binary: %w", err)
	}
	p := &fjordProc{addr: addr, dir: dir, done: make(chan struct{})}
	if p.log, err = os.OpenFile(filepath.Join(dir, "fjord.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, append([]string{
		"--override", "listeners=PLAINTEXT://" + p.addr,
		"--override", "log.dirs=" + p.dataDir(),
	}, extra...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = childSysProcAttr()
	logf("[fjord] starting %s", strings.Join(redactArgs(p.cmd.Args), " "))
	if err := p.cmd.Start(); err != nil {
		p.log.Close()
		return nil, fmt.Errorf("start fjord: %w", err)
	}
	childrenMu.Lock()
	children[p] = true
	childrenMu.Unlock()
	go func() { p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// redactArgs hides the values of password keys (the tier mode's S3
// secret) in a command line that is logged.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if k, _, ok := strings.Cut(a, "="); ok && (strings.HasSuffix(k, ".secret.access.key") || strings.HasSuffix(k, ".password")) {
			a = k + "=[hidden]"
		}
		out[i] = a
	}
	return out
}

// startFjordIn is startFjord on a given directory and address: a restart
// of a node whose data is there (its output is appended to fjord.log).
// A node answers only once it has opened its logs: wait bounds that.
// extra are more command-line arguments.
func startFjordIn(ctx context.Context, bin, dir, addr string, wait time.Duration, extra ...string) (*fjordProc, error) {
	p, err := launchFjord(bin, dir, addr, extra...)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, wait); err != nil {
		tail := p.logTail()
		p.halt(syscall.SIGTERM, 10*time.Second)
		return nil, fmt.Errorf("%w; fjord log: %s", err, tail)
	}
	return p, nil
}

// waitReady pings the broker until it answers, the process exits, or
// startupWait passes.
func (p *fjordProc) waitReady(ctx context.Context, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		err := cl.Ping(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("fjord exited during start-up (%v)", p.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("fjord did not answer on %s within %s: %v", p.addr, wait, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// dataDir is the node's log.dirs.
func (p *fjordProc) dataDir() string { return filepath.Join(p.dir, "data") }

func (p *fjordProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, kills after 10s, and removes the temp dir.
func (p *fjordProc) stop() {
	p.halt(syscall.SIGTERM, 10*time.Second)
	os.RemoveAll(p.dir)
}

// halt sends sig, kills after wait, and waits for the exit; the data
// stays for a restart (startFjordIn).
func (p *fjordProc) halt(sig syscall.Signal, wait time.Duration) {
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(wait):
		logf("[fjord] did not stop on %v within %s, killing", sig, wait)
		p.cmd.Process.Kill()
		<-p.done
	}
	childrenMu.Lock()
	delete(children, p)
	childrenMu.Unlock()
	p.log.Close()
}

// logTail returns the last lines of the process's output, on one line.
func (p *fjordProc) logTail() string {
	b, err := os.ReadFile(p.log.Name())
	if err != nil || len(b) == 0 {
		return "(empty)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], " | ")
}

// freePorts asks the kernel for n distinct free loopback ports. Each
// listener stays open until all n are chosen: closing one before asking
// for the next lets the kernel hand the same port out twice, and a
// cluster whose two nodes were given one port never forms.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port %d of %d: %w", len(ports)+1, n, err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// rssMiB reads VmRSS of pid from /proc/PID/status, in MiB.
func rssMiB(pid int) (float64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// The line reads "VmRSS:     12345 kB".
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(fields[1], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// rssSampler tracks the peak VmRSS of a process while the suites run.
type rssSampler struct {
	quit chan struct{}
	done chan struct{}
	peak float64
	n    int
}

func startRSSSampler(pid int, every time.Duration) *rssSampler {
	s := &rssSampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if v, err := rssMiB(pid); err == nil {
				s.peak = max(s.peak, v)
				s.n++
			}
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends sampling and returns the peak in MiB and the sample count.
func (s *rssSampler) stop() (float64, int) {
	close(s.quit)
	<-s.done
	return s.peak, s.n
}
