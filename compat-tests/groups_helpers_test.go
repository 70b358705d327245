package compattests

// Helpers shared by the consumer group tests (groups_*_test.go).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Group timing used by every group test: the broker's minimum session
// timeout, and a fast heartbeat.
const (
	groupSessionTimeout = 6 * time.Second
	groupHeartbeat      = 500 * time.Millisecond
)

// groupBrokerOverrides are the broker settings for fast group tests.
var groupBrokerOverrides = []string{"group.initial.rebalance.delay.ms=0"}

// waitUntil polls cond every 50ms until it returns true or timeout passes,
// then fails the test with what cond last described.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	var last string
	for {
		ok, desc := cond()
		if ok {
			return time.Since(start)
		}
		last = desc
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; last state: %s", what, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cutDialer is a kgo.Dialer whose connections can all be cut at once, after
// which every dial fails: a member whose process vanished from the network
// without leaving its group. target, when set, replaces the dialed address
// (a single-broker cluster whose address may change across restarts).
type cutDialer struct {
	target func() string

	mu    sync.Mutex
	conns []net.Conn
	cut   bool
	dials int
}

func (d *cutDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	if d.cut {
		d.mu.Unlock()
		return nil, errors.New("cutDialer: network cut")
	}
	d.dials++
	d.mu.Unlock()
	if d.target != nil {
		host = d.target()
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		c.Close()
		return nil, errors.New("cutDialer: network cut")
	}
	d.conns = append(d.conns, c)
	return c, nil
}

// Cut closes every connection made so far and fails all later dials.
func (d *cutDialer) Cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// recKey identifies a record by partition and offset.
type recKey struct {
	p   int32
	off int64
}

// consumedLog is what a set of group members processed, shared by them.
type consumedLog struct {
	mu       sync.Mutex
	seen     map[recKey]int    // times processed
	values   map[recKey]string // value processed at that position
	byMember map[string]int
	who      map[recKey]string // member that last processed the record
	mismatch []string
}

func newConsumedLog() *consumedLog {
	return &consumedLog{seen: map[recKey]int{}, values: map[recKey]string{}, byMember: map[string]int{}, who: map[recKey]string{}}
}

func (l *consumedLog) add(member string, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := recKey{r.Partition, r.Offset}
	if v, ok := l.values[k]; ok && v != string(r.Value) {
		l.mismatch = append(l.mismatch, fmt.Sprintf("p%d@%d read as %q and %q", k.p, k.off, v, r.Value))
	}
	l.values[k] = string(r.Value)
	l.seen[k]++
	l.byMember[member]++
	l.who[k] = member
}

// consumersOf returns, for the given records, how many each member
// processed (last processing wins) and how many nobody processed yet.
func (l *consumedLog) consumersOf(recs map[recKey]string) (map[string]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	pending := 0
	for k := range recs {
		if m, ok := l.who[k]; ok {
			out[m]++
		} else {
			pending++
		}
	}
	return out, pending
}

// check compares the log with the acknowledged records: missing are acked
// records never processed, wrong are records processed with a value other
// than the acknowledged one, dups are extra deliveries.
func (l *consumedLog) check(acked map[recKey]string) (missing []recKey, wrong []string, dups int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, v := range acked {
		got, ok := l.values[k]
		if !ok {
			missing = append(missing, k)
			continue
		}
		if got != v {
			wrong = append(wrong, fmt.Sprintf("p%d@%d: consumed %q, produced %q", k.p, k.off, got, v))
		}
	}
	for _, n := range l.seen {
		dups += n - 1
	}
	wrong = append(wrong, l.mismatch...)
	sort.Slice(missing, func(i, j int) bool {
		if missing[i].p != missing[j].p {
			return missing[i].p < missing[j].p
		}
		return missing[i].off < missing[j].off
	})
	return missing, wrong, dups
}

func (l *consumedLog) memberCounts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.byMember {
		out[k] = v
	}
	return out
}

func (l *consumedLog) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.values)
}

// franzMember is one franz-go group member with its own client, a poll loop
// that records and marks everything it processes, and the partitions it owns
// according to its assigned/revoked/lost callbacks.
type franzMember struct {
	t      testing.TB
	name   string
	topic  string
	cl     *kgo.Client
	dialer *cutDialer
	log    *consumedLog

	mu          sync.Mutex
	owned       map[int32]bool
	assignments int // OnPartitionsAssigned calls with at least one partition
	events      []string
	pollErrs    []string

	cancel context.CancelFunc
	done   chan struct{}
}

// startFranzMember creates a member of group consuming topic (from the
// start when nothing is committed), committing marked records (autocommit of
// marks every 200ms, plus a synchronous commit when partitions are revoked).
func startFranzMember(t testing.TB, name, addr, group, topic string, log *consumedLog, dialer *cutDialer, opts ...kgo.Opt) *franzMember {
	t.Helper()
	m := &franzMember{t: t, name: name, topic: topic, dialer: dialer, log: log, owned: map[int32]bool{}, done: make(chan struct{})}
	if m.dialer == nil {
		m.dialer = &cutDialer{}
	}
	base := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID(name),
		kgo.Dialer(m.dialer.dial),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(groupSessionTimeout),
		kgo.HeartbeatInterval(groupHeartbeat),
		kgo.RebalanceTimeout(15 * time.Second),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.MetadataMinAge(250 * time.Millisecond), // re-read metadata quickly after a broker restart
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			ps := a[topic]
			for _, p := range ps {
				m.owned[p] = true
			}
			if len(ps) > 0 {
				m.assignments++
			}
			m.events = append(m.events, fmt.Sprintf("%s +%v => %v", time.Now().Format("15:04:05.000"), sorted32(ps), m.ownedLocked()))
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			// The default revoke commits; ours must too.
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				m.mu.Lock()
				m.events = append(m.events, fmt.Sprintf("%s commit on revoke: %v", time.Now().Format("15:04:05.000"), err))
				m.mu.Unlock()
			}
			m.drop("-", r[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			m.drop("lost", l[topic])
		}),
	}
	if os.Getenv("FJORD_GROUP_TEST_DEBUG") != "" {
		base = append(base, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, func() string {
			return time.Now().Format("15:04:05.000 ") + name + " "
		})))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("%s: kgo.NewClient: %v", name, err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.loop(ctx)
	return m
}

func (m *franzMember) drop(how string, ps []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(ps) == 0 && how == "lost" {
		return // a cut-off member loses nothing, repeatedly
	}
	for _, p := range ps {
		delete(m.owned, p)
	}
	m.events = append(m.events, fmt.Sprintf("%s %s%v => %v", time.Now().Format("15:04:05.000"), how, sorted32(ps), m.ownedLocked()))
}

func (m *franzMember) loop(ctx context.Context) {
	defer close(m.done)
	for {
		fs := m.cl.PollRecords(ctx, 200)
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(tp string, p int32, err error) {
			m.mu.Lock()
			m.pollErrs = append(m.pollErrs, fmt.Sprintf("%s[%d]: %v", tp, p, err))
			m.mu.Unlock()
		})
		if fs.IsClientClosed() {
			return
		}
		recs := fs.Records()
		for _, r := range recs {
			m.log.add(m.name, r)
		}
		m.cl.MarkCommitRecords(recs...)
	}
}

// StopPolling ends the poll loop and waits for it: nothing polled after
// this counts as processed.
func (m *franzMember) StopPolling() {
	m.cancel()
	<-m.done
}

// Close stops polling and closes the client (which leaves the group and
// commits through the revoke callback), giving up after timeout.
func (m *franzMember) Close(timeout time.Duration) {
	m.StopPolling()
	done := make(chan struct{})
	go func() { m.cl.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		m.t.Logf("%s: client Close did not return within %v", m.name, timeout)
	}
}

func (m *franzMember) ownedLocked() []int32 {
	var out []int32
	for p := range m.owned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (m *franzMember) Owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ownedLocked()
}

func (m *franzMember) Assignments() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.assignments
}

func (m *franzMember) History() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.name + " assignment history:\n  " + strings.Join(m.events, "\n  ")
	if len(m.pollErrs) > 0 {
		errs := m.pollErrs
		if len(errs) > 10 {
			errs = append(errs[:10:10], fmt.Sprintf("... and %d more", len(m.pollErrs)-10))
		}
		s += "\n  poll errors: " + strings.Join(errs, "; ")
	}
	return s
}

func sorted32(ps []int32) []int32 {
	out := append([]int32(nil), ps...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ownership checks that members own disjoint sets of partitions covering
// 0..partitions-1 and that each owns between min and max of them.
func ownership(partitions int, min, max int, members ...*franzMember) (bool, string) {
	seen := map[int32]string{}
	ok := true
	var desc []string
	for _, m := range members {
		o := m.Owned()
		desc = append(desc, fmt.Sprintf("%s=%v", m.name, o))
		if len(o) < min || len(o) > max {
			ok = false
		}
		for _, p := range o {
			if other, dup := seen[p]; dup {
				ok = false
				desc = append(desc, fmt.Sprintf("p%d owned by both %s and %s", p, other, m.name))
			}
			seen[p] = m.name
		}
	}
	if len(seen) != partitions {
		ok = false
	}
	return ok, strings.Join(desc, " ")
}

// produceAcked produces n records (values prefix-i, keys spread) to topic
// and returns them by acknowledged position.
func produceAcked(t testing.TB, cl *kgo.Client, topic, prefix string, n int) map[recKey]string {
	t.Helper()
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%d", i%97)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("producing %d records to %s: %v", n, topic, err)
	}
	out := map[recKey]string{}
	for _, r := range res {
		out[recKey{r.Record.Partition, r.Record.Offset}] = string(r.Record.Value)
	}
	return out
}

// committedOffsets returns group's committed offsets for topic (partition
// -> offset) and fails on any error.
func committedOffsets(t testing.TB, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("FetchOffsets(%s): %v", group, err)
	}
	out := map[int32]int64{}
	for tp, ps := range resp {
		for p, o := range ps {
			if o.Err != nil {
				t.Fatalf("FetchOffsets(%s) %s[%d]: %v", group, tp, p, o.Err)
			}
			if tp == topic {
				out[p] = o.At
			}
		}
	}
	return out
}

func fmtOffsets(m map[int32]int64) string {
	var ps []int32
	for p := range m {
		ps = append(ps, p)
	}
	ps = sorted32(ps)
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%d:%d", p, m[p]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func sameOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if bo, ok := b[p]; !ok || bo != o {
			return false
		}
	}
	return true
}
