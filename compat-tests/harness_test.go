// Package compattests runs real Kafka clients (franz-go, sarama, kcat)
// against a freshly built fjord binary. Every test starts its own broker
// process on its own loopback port and data directory.
package compattests

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// fjordBin is the broker binary every test runs: $FJORD_BIN, or one built
// once by TestMain from the parent module.
var fjordBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if bin := os.Getenv("FJORD_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "FJORD_BIN: %v\n", err)
			return 2
		}
		fjordBin = abs
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "fjord-compat-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "temp dir: %v\n", err)
		return 2
	}
	defer os.RemoveAll(dir)
	fjordBin = filepath.Join(dir, "fjord")
	cmd := exec.Command("go", "build", "-o", fjordBin, "github.com/fjordlog/fjord/cmd/fjord")
	cmd.Dir = ".." // the broker's own module
	// Static, as make build does, so the compose tests can put it in a
	// FROM scratch image.
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building fjord: %v\n%s", err, out)
		return 2
	}
	return m.Run()
}

// Broker is one fjord process (and its successors after Restart) serving a
// data directory.
type Broker struct {
	t         testing.TB
	DataDir   string
	Addr      string // host:port of the current process
	overrides []string
	// nofile, if set, caps the process's open file descriptors (prlimit).
	nofile int
	// netns, if set, is the network namespace the process runs in; the
	// harness reaches it through netns.DialContext.
	netns *netNS
	// host is the address the process listens on ("" for 127.0.0.1): a
	// node of a namespaced network has its own.
	host string
	// dial, if set, is how the harness reaches the process (from a client
	// namespace of a namespaced network); else directly or into netns.
	dial    dialFunc
	logPath string
	logFile *os.File

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has been waited for
	waitErr error
	starts  int
}

// startBroker starts fjord on a free loopback port serving dataDir, with
// extra --override key=value settings, and waits until it answers metadata.
func startBroker(t testing.TB, dataDir string, overrides ...string) *Broker {
	t.Helper()
	return startBrokerLimited(t, dataDir, 0, overrides...)
}

// startBrokerLimited is startBroker with at most nofile open descriptors
// (0: the default).
func startBrokerLimited(t testing.TB, dataDir string, nofile int, overrides ...string) *Broker {
	t.Helper()
	b := newBroker(t, dataDir, nofile, overrides)
	b.start("")
	return b
}

// startBrokerIn is startBroker inside the network namespace ns, on a
// fixed port: nothing else there can hold it.
func startBrokerIn(t testing.TB, ns *netNS, port, dataDir string, overrides ...string) *Broker {
	t.Helper()
	b := newBroker(t, dataDir, 0, overrides)
	b.netns = ns
	b.start(port)
	return b
}

// newBroker is a broker handle with its log file and clean-up, not started.
func newBroker(t testing.TB, dataDir string, nofile int, overrides []string) *Broker {
	t.Helper()
	logDir := t.TempDir()
	b := &Broker{t: t, DataDir: dataDir, overrides: overrides, nofile: nofile, logPath: filepath.Join(logDir, "fjord.log")}
	f, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("broker log: %v", err)
	}
	b.logFile = f
	t.Cleanup(func() {
		b.Kill()
		if t.Failed() {
			b.dumpLog(50)
		}
		b.reportErrorLines()
		b.logFile.Close()
	})
	return b
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// start launches a process; port "" picks a free one. A bind failure (the
// port was taken between picking and binding) is retried on a new port,
// except in a namespace, where the port is fixed and free ports of the
// host mean nothing.
func (b *Broker) start(port string) {
	b.t.Helper()
	for attempt := 0; ; attempt++ {
		if port == "" || attempt > 0 {
			port = freePort(b.t)
		}
		err := b.launch(port)
		if err == nil {
			return
		}
		if errors.Is(err, errBindFailed) && attempt < 5 && b.netns == nil {
			b.t.Logf("broker could not bind port %s, retrying: %v", port, err)
			continue
		}
		b.t.Fatalf("starting broker: %v", err)
	}
}

var errBindFailed = errors.New("bind failed")

// listenHost is the host of the process's listeners.
func (b *Broker) listenHost() string {
	if b.host != "" {
		return b.host
	}
	return "127.0.0.1"
}

func (b *Broker) launch(port string) error {
	addr := net.JoinHostPort(b.listenHost(), port)
	args := []string{
		"--override", "listeners=PLAINTEXT://" + addr,
		"--override", "log.dirs=" + b.DataDir,
	}
	var probeOpts []kgo.Opt
	if b.netns != nil || b.dial != nil {
		probeOpts = append(probeOpts, kgo.Dialer(b.dialer()))
	}
	for _, o := range b.overrides {
		// compat.probe.sasl.plain=user:password is the harness's, not
		// fjord's: the probe authenticates so on a SASL-only listener.
		if up, ok := strings.CutPrefix(o, "compat.probe.sasl.plain="); ok {
			u, p, _ := strings.Cut(up, ":")
			probeOpts = append(probeOpts, kgo.SASL(plain.Auth{User: u, Pass: p}.AsMechanism()))
			continue
		}
		// compat.probe.tls.ca=ca.pem: the probed listener is TLS, its
		// certificate signed by that CA.
		if ca, ok := strings.CutPrefix(o, "compat.probe.tls.ca="); ok {
			probeOpts = append(probeOpts, kgo.DialTLSConfig(probeTLS(b.t, ca)))
			continue
		}
		// {port} is this start's port, for a test that lists its own
		// listeners and keeps the probed PLAINTEXT one.
		args = append(args, "--override", strings.ReplaceAll(o, "{port}", port))
	}
	b.mu.Lock()
	b.starts++
	fmt.Fprintf(b.logFile, "=== compat-tests: start #%d on %s: %s %s\n", b.starts, addr, fjordBin, strings.Join(args, " "))
	cmd := b.command(args)
	cmd.Stdout = b.logFile
	cmd.Stderr = b.logFile
	if err := cmd.Start(); err != nil {
		b.mu.Unlock()
		return err
	}
	done := make(chan struct{})
	b.cmd, b.done, b.waitErr, b.Addr = cmd, done, nil, addr
	b.mu.Unlock()
	go func() {
		err := cmd.Wait()
		b.mu.Lock()
		b.waitErr = err
		b.mu.Unlock()
		close(done)
	}()

	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			b.mu.Lock()
			werr := b.waitErr
			b.mu.Unlock()
			if strings.Contains(b.tailLog(20), "address already in use") {
				return fmt.Errorf("%w: %v", errBindFailed, werr)
			}
			return fmt.Errorf("broker exited during start-up: %v\n%s", werr, b.tailLog(50))
		default:
		}
		if last = probeVia(b.dialer(), addr, probeOpts...); last == nil {
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	b.Kill()
	return fmt.Errorf("broker at %s not ready after 30s (last error: %v)", addr, last)
}

// probeTLS is the client configuration of a harness probe on a TLS
// listener whose certificate the CA in caFile (PEM) signed.
func probeTLS(t testing.TB, caFile string) *tls.Config {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatalf("compat.probe.tls.ca: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("compat.probe.tls.ca %s: no certificate", caFile)
	}
	return &tls.Config{RootCAs: roots}
}

// command is the fjord process of one start with args: under prlimit
// when nofile is set, inside the namespace when there is one.
func (b *Broker) command(args []string) *exec.Cmd {
	name, argv := fjordBin, args
	if b.nofile > 0 {
		name, argv = "prlimit", append([]string{fmt.Sprintf("--nofile=%d", b.nofile), fjordBin}, args...)
	}
	if b.netns != nil {
		return b.netns.Command(name, argv...)
	}
	return exec.Command(name, argv...)
}

// dialFunc dials like net.Dialer.DialContext.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// dialer is how the test process reaches this broker's listeners:
// directly, into its namespace, or as b.dial says.
func (b *Broker) dialer() dialFunc {
	if b.dial != nil {
		return b.dial
	}
	if b.netns != nil {
		return b.netns.DialContext
	}
	var d net.Dialer
	return d.DialContext
}

// probe checks that addr accepts TCP and answers a kadm metadata request.
func probe(addr string, opts ...kgo.Opt) error {
	var d net.Dialer
	return probeVia(d.DialContext, addr, opts...)
}

// probeVia is probe with the TCP check made by dial (the metadata
// request's client dials as opts say).
func probeVia(dial dialFunc, addr string, opts ...kgo.Opt) error {
	dialCtx, cancelDial := context.WithTimeout(context.Background(), time.Second)
	c, err := dial(dialCtx, "tcp", addr)
	cancelDial()
	if err != nil {
		return err
	}
	c.Close()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	if len(md.Brokers) == 0 {
		return errors.New("metadata lists no brokers")
	}
	return nil
}

// Stop sends SIGTERM and waits for a clean exit (status 0) within 30s.
func (b *Broker) Stop() {
	b.t.Helper()
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		b.t.Fatalf("broker did not exit within 30s of SIGTERM")
	}
	b.mu.Lock()
	werr := b.waitErr
	b.cmd = nil
	b.mu.Unlock()
	if werr != nil {
		b.t.Errorf("broker clean shutdown exited with %v", werr)
	}
}

// Kill sends SIGKILL and waits for the process to go.
func (b *Broker) Kill() {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// exited reports whether the process started last has exited (not
// whether it was stopped: a handle never started or stopped has not).
func (b *Broker) exited() bool {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Restart starts a new process on the same data directory, on the same
// port if it is still free (else on a new one: read Addr again). The
// previous process must have been stopped or killed.
func (b *Broker) Restart() {
	b.t.Helper()
	b.mu.Lock()
	running := b.cmd != nil
	_, port, _ := net.SplitHostPort(b.Addr)
	b.mu.Unlock()
	if running {
		b.t.Fatalf("Restart with the broker still running")
	}
	b.start(port)
}

func (b *Broker) readLog() string {
	data, _ := os.ReadFile(b.logPath)
	return string(data)
}

func (b *Broker) tailLog(n int) string {
	lines := strings.Split(strings.TrimRight(b.readLog(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (b *Broker) dumpLog(n int) {
	b.t.Logf("last %d lines of broker log %s:\n%s", n, b.logPath, b.tailLog(n))
}

// reportErrorLines logs (without failing) any error/panic lines the broker
// wrote, so they show up with -v.
func (b *Broker) reportErrorLines() {
	var hits []string
	stack := 0 // lines of a Go panic's stack still to keep
	sc := bufio.NewScanner(bytes.NewReader([]byte(b.readLog())))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "panic:"):
			hits = append(hits, l)
			stack = 60 // the crash's stack, which the deleted log dir would lose
		case stack > 0:
			hits = append(hits, l)
			stack--
		case strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"fatal"`) ||
			strings.Contains(l, `"level":"panic"`):
			hits = append(hits, l)
		}
	}
	if len(hits) > 0 {
		if len(hits) > 100 {
			hits = append(hits[:100], fmt.Sprintf("... and %d more", len(hits)-100))
		}
		b.t.Logf("broker logged %d error lines:\n%s", len(hits), strings.Join(hits, "\n"))
	}
}

// logContains reports whether the broker log has a line containing s.
func (b *Broker) logContains(s string) bool { return strings.Contains(b.readLog(), s) }

// toolPath finds an external program the test runs (kcat, prometheus,
// chromium): the test is skipped when it is absent, unless the
// environment variable require is set, which makes it a failure.
func toolPath(t *testing.T, name, require string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(require) != "" {
			t.Fatalf("%s not found and %s is set: %v", name, require, err)
		}
		t.Skipf("%s not found (%v); set %s to make this a failure", name, err, require)
	}
	return p
}

// ---- client helpers ----

// newClient returns a franz-go client for the broker, closed at cleanup.
func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func newAdmin(t testing.TB, addr string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, addr))
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// awaitOffsetsTopic has a consumer group's first lookup create
// __consumer_offsets (the broker creates it on first need, as Kafka does)
// and waits until every one of its partitions has a leader.
func awaitOffsetsTopic(t testing.TB, adm *kadm.Client) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	for {
		adm.FindGroupCoordinators(ctx, "fjord-test-offsets-topic")
		td, err := adm.ListTopics(ctx, "__consumer_offsets")
		t0 := td["__consumer_offsets"]
		ok := err == nil && t0.Err == nil && len(t0.Partitions) > 0
		for _, p := range t0.Partitions {
			ok = ok && p.Leader >= 0
		}
		if ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("__consumer_offsets never created and led: %v %v", err, t0.Err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// createTopic creates a topic and fails the test on any error.
func createTopic(t testing.TB, adm *kadm.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, name)
	if err != nil {
		t.Fatalf("create topic %q: %v (%s)", name, err, resp.ErrMessage)
	}
}

// endOffsets returns the latest offset of every partition of topic.
func endOffsets(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets %q: %v", topic, err)
	}
	out := map[int32]int64{}
	for _, ps := range lo {
		for p, o := range ps {
			if o.Err != nil {
				t.Fatalf("list end offsets %s[%d]: %v", topic, p, o.Err)
			}
			out[p] = o.Offset
		}
	}
	return out
}

// consumeAll reads every partition of topic from the start until want
// records have arrived or the timeout passes, returning what it read.
func consumeAll(t testing.TB, addr, topic string, want int, timeout time.Duration, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)
	cl := newClient(t, addr, opts...)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Errorf("consuming %q: got %d of %d records before timeout", topic, len(out), want)
			return out
		}
		fs.EachError(func(tp string, p int32, err error) {
			t.Errorf("fetch error %s[%d]: %v", tp, p, err)
		})
		if t.Failed() {
			return out
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// batchCodecs fetches partition p of topic from offset 0 with a raw Fetch
// v11 and returns the compression codec (attributes & 7) of each batch.
func batchCodecs(t testing.TB, addr string, topic string, p int32) []int8 {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MaxBytes = 8 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset = p, 0, 8<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := dialRaw(t, addr).roundTrip(t, req).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("raw fetch %s[%d]: unexpected response shape %+v", topic, p, resp)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("raw fetch %s[%d]: error %v", topic, p, kerr.ErrorForCode(sp.ErrorCode))
	}
	var out []int8
	raw := sp.RecordBatches
	for len(raw) >= 12 {
		n := int(binary.BigEndian.Uint32(raw[8:12])) + 12
		if n > len(raw) {
			break // a partial batch at the end is allowed
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw[:n]); err != nil {
			t.Fatalf("raw fetch %s[%d]: parsing batch: %v", topic, p, err)
		}
		out = append(out, int8(rb.Attributes&7))
		raw = raw[n:]
	}
	return out
}

// checkStoredCodec checks the broker kept the producer's compression
// (compression.type=producer): some stored batch uses the codec and none
// uses another. Uncompressed batches are allowed, as clients send a batch
// uncompressed when compressing does not make it smaller.
func checkStoredCodec(t testing.TB, codecs []int8, want int8, what string) {
	t.Helper()
	if len(codecs) == 0 {
		t.Errorf("%s: raw fetch returned no batches", what)
		return
	}
	hist := map[int8]int{}
	for _, c := range codecs {
		hist[c]++
	}
	for c, n := range hist {
		if c != want && c != 0 {
			t.Errorf("%s: %d stored batches use codec %d, want %d or none", what, n, c, want)
		}
	}
	if want != 0 && hist[want] == 0 {
		t.Errorf("%s: none of the %d stored batches is compressed with codec %d (codecs seen: %v)", what, len(codecs), want, hist)
	}
}
