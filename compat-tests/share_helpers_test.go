package compattests

// Helpers of the share group (KIP-932) tests: franz-go share consumers
// that log every delivery with its delivery count and what became of its
// acknowledgement, a network such a consumer can lose, and the requests
// kadm does not make (group configs, ShareGroupDescribe, ListGroups by
// type, FindCoordinator for a share-partition, the share coordinator's
// state summary).

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// defaultShareLock is share.record.lock.duration.ms's default (Kafka's
// group.share.record.lock.duration.ms).
const defaultShareLock = 30 * time.Second

// shareBrokerOverrides make share group members heartbeat every 500 ms
// (Kafka's floor and default are 5 s), so that an assignment change
// reaches every member in a test's time.
var shareBrokerOverrides = []string{
	"group.share.min.heartbeat.interval.ms=500",
	"group.share.heartbeat.interval.ms=500",
}

// setShareConfigs sets group configs (key, value pairs) on group with
// IncrementalAlterConfigs through clients[0] and waits until every client
// (one per node) describes them. A share-partition reads most of its
// group's settings when it loads (share.isolation.level: on every
// ShareFetch), so they must be in place before a member's first
// ShareFetch.
func setShareConfigs(t testing.TB, group string, clients []*kgo.Client, kvs ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	want := map[string]string{}
	for i := 0; i+1 < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = kvs[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kvs[i+1])
		rr.Configs = append(rr.Configs, c)
		want[kvs[i]] = kvs[i+1]
	}
	req.Resources = append(req.Resources, rr)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, clients[0])
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs on group %s: %v", group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			t.Fatalf("IncrementalAlterConfigs on group %s %v: %v (%s)", group, kvs, err, msg)
		}
	}
	for i, cl := range clients {
		waitUntil(t, 15*time.Second, fmt.Sprintf("client %d describes group %s's configs %v", i, group, kvs), func() (bool, string) {
			dreq := kmsg.NewPtrDescribeConfigsRequest()
			dr := kmsg.NewDescribeConfigsRequestResource()
			dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
			dreq.Resources = append(dreq.Resources, dr)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			dresp, err := dreq.RequestWith(ctx, cl)
			if err != nil || len(dresp.Resources) != 1 {
				return false, fmt.Sprintf("DescribeConfigs: %v", err)
			}
			got := map[string]string{}
			for _, c := range dresp.Resources[0].Configs {
				if c.Value != nil {
					got[c.Name] = *c.Value
				}
			}
			for k, v := range want {
				if got[k] != v {
					return false, fmt.Sprintf("%s=%q", k, got[k])
				}
			}
			return true, ""
		})
	}
}

// ackOutcome is what became of one delivery's acknowledgement.
type ackOutcome int8

const (
	ackNone      ackOutcome = iota // not acknowledged (yet)
	ackConfirmed                   // every result for its partition in its flush was a success
	ackFailed                      // a result for its partition in its flush was an error
	ackUnknown                     // its flush ended with no result for its partition
)

func (o ackOutcome) String() string {
	return [...]string{"none", "confirmed", "failed", "unknown"}[o]
}

// shareDelivery is one record as a share consumer's poll returned it.
type shareDelivery struct {
	member string
	key    recKey
	value  string
	dc     int32 // the broker's delivery count
	// acquired is when franz-go decoded the ShareFetch response that
	// carried the record: its acquisition lock deadline
	// (Record.AcquisitionDeadline, decode time plus the lock duration
	// the broker announced) less the group's lock duration. Acquired
	// times order a record's acquisitions: it is acquired again only
	// after the previous holder's lock expired or the record was
	// released, both after the previous holder's response was decoded.
	acquired time.Time
	polled   time.Time
	ack      kgo.AckStatus // 0: not acknowledged
	outcome  ackOutcome
	ackErr   error
	// confirmed is when the last result for the record's partition in
	// its flush arrived (outcome ackConfirmed).
	confirmed time.Time
}

func (d shareDelivery) String() string {
	s := fmt.Sprintf("%s dc=%d acquired %s polled %s", d.member, d.dc, d.acquired.Format("15:04:05.000"), d.polled.Format("15:04:05.000"))
	if d.ack != 0 {
		s += fmt.Sprintf(" %v:%v", d.ack, d.outcome)
		if d.ackErr != nil {
			s += fmt.Sprintf("(%v)", d.ackErr)
		}
		if d.outcome == ackConfirmed {
			s += " at " + d.confirmed.Format("15:04:05.000")
		}
	}
	return s
}

// shareLog is every delivery to a set of share consumers of one group, in
// poll order.
type shareLog struct {
	lock  time.Duration // the group's share.record.lock.duration.ms
	mu    sync.Mutex
	all   []shareDelivery
	byKey map[recKey][]int // indexes into all
}

func newShareLog(lock time.Duration) *shareLog {
	return &shareLog{lock: lock, byKey: map[recKey][]int{}}
}

func (l *shareLog) add(d shareDelivery) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, d)
	i := len(l.all) - 1
	l.byKey[d.key] = append(l.byKey[d.key], i)
	return i
}

// ackResult is one acknowledgement result for a partition, and when it
// arrived.
type ackResult struct {
	err error
	at  time.Time
}

// settle records the outcome of the acknowledgements of deliveries ids
// from the results their flush collected, by partition.
func (l *shareLog) settle(ids []int, results map[int32][]ackResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, i := range ids {
		d := &l.all[i]
		if d.ack == 0 {
			continue
		}
		rs := results[d.key.p]
		d.outcome = ackUnknown
		if len(rs) > 0 {
			d.outcome = ackConfirmed
			for _, r := range rs {
				if r.err != nil {
					d.outcome, d.ackErr = ackFailed, r.err
					break
				}
				if r.at.After(d.confirmed) {
					d.confirmed = r.at
				}
			}
		}
	}
}

// deliveries returns a copy of every delivery of k, in poll order.
func (l *shareLog) deliveries(k recKey) []shareDelivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []shareDelivery
	for _, i := range l.byKey[k] {
		out = append(out, l.all[i])
	}
	return out
}

// snapshot returns a copy of every delivery.
func (l *shareLog) snapshot() []shareDelivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

// confirmedAccepts counts per member the deliveries whose acceptance was
// confirmed, of those that match (nil: all).
func (l *shareLog) confirmedAccepts(match func(shareDelivery) bool) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, d := range l.all {
		if d.ack == kgo.AckAccept && d.outcome == ackConfirmed && (match == nil || match(d)) {
			out[d.member]++
		}
	}
	return out
}

// accepted reports whether k has a delivery acknowledged as accepted
// (confirmed only: confirmed; else any outcome).
func (l *shareLog) accepted(k recKey, confirmed bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, i := range l.byKey[k] {
		d := l.all[i]
		if d.ack == kgo.AckAccept && (!confirmed || d.outcome == ackConfirmed) {
			return true
		}
	}
	return false
}

// missing returns the records of acked (position -> value) without an
// accepted delivery (confirmed only: without a confirmed one), sorted.
func (l *shareLog) missing(acked map[recKey]string, confirmed bool) []recKey {
	var out []recKey
	for k := range acked {
		if !l.accepted(k, confirmed) {
			out = append(out, k)
		}
	}
	sortKeys(out)
	return out
}

func sortKeys(ks []recKey) {
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].p != ks[j].p {
			return ks[i].p < ks[j].p
		}
		return ks[i].off < ks[j].off
	})
}

// figures summarizes the log: deliveries, distinct records, redeliveries
// (delivery count above 1), acknowledgement outcomes, per member confirmed
// accepts.
func (l *shareLog) figures() string {
	l.mu.Lock()
	all := slices.Clone(l.all)
	distinct := len(l.byKey)
	l.mu.Unlock()
	redelivered, outcomes, errs := 0, map[string]int{}, map[string]int{}
	for _, d := range all {
		if d.dc > 1 {
			redelivered++
		}
		if d.ack != 0 {
			outcomes[fmt.Sprintf("%v:%v", d.ack, d.outcome)]++
		}
		if d.ackErr != nil {
			errs[d.ackErr.Error()]++
		}
	}
	s := fmt.Sprintf("%d deliveries of %d records, %d with delivery count > 1, acks %v, confirmed accepts per member %v",
		len(all), distinct, redelivered, outcomes, l.confirmedAccepts(nil))
	if len(errs) > 0 {
		s += fmt.Sprintf(", acknowledgement errors %v", errs)
	}
	return s
}

// checkAcquired returns the deliveries whose computed acquisition time
// is after their poll: the broker announced a lock longer than the
// group's share.record.lock.duration.ms.
func (l *shareLog) checkAcquired() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, d := range l.all {
		if d.acquired.After(d.polled.Add(50 * time.Millisecond)) {
			out = append(out, fmt.Sprintf("p%d@%d: %v", d.key.p, d.key.off, d))
		}
	}
	return out
}

// checkValues returns the deliveries whose value is not the acknowledged
// one at their position.
func (l *shareLog) checkValues(acked map[recKey]string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, d := range l.all {
		if v, ok := acked[d.key]; ok && v != d.value {
			out = append(out, fmt.Sprintf("p%d@%d delivered to %s as %q, produced as %q", d.key.p, d.key.off, d.member, d.value, v))
		}
	}
	return out
}

// checkDeliveryCounts checks every record's deliveries in acquisition
// order: every delivery count is at least 1 and they
// never go down. It returns the violations, and separately the records
// delivered twice with the same count (which Kafka allows after a
// share-partition leader change, because it does not persist
// acquisitions, and Fjord does not: group/sharepart persists the count
// of every acquisition).
func (l *shareLog) checkDeliveryCounts() (bad, repeated []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, ids := range l.byKey {
		ds := make([]shareDelivery, len(ids))
		for i, id := range ids {
			ds[i] = l.all[id]
		}
		sort.SliceStable(ds, func(i, j int) bool { return ds[i].acquired.Before(ds[j].acquired) })
		for i, d := range ds {
			if d.dc < 1 {
				bad = append(bad, fmt.Sprintf("p%d@%d delivered with delivery count %d: %v", k.p, k.off, d.dc, d))
			}
			if i == 0 {
				continue
			}
			switch prev := ds[i-1]; {
			case d.dc < prev.dc:
				bad = append(bad, fmt.Sprintf("p%d@%d: delivery count went down: %v, then %v", k.p, k.off, prev, d))
			case d.dc == prev.dc:
				repeated = append(repeated, fmt.Sprintf("p%d@%d: delivered twice with delivery count %d: %v, then %v", k.p, k.off, d.dc, prev, d))
			}
		}
	}
	sort.Strings(bad)
	sort.Strings(repeated)
	return bad, repeated
}

// checkAcceptedStayDone checks KIP-932's rule for accepted records, as
// Kafka implements it: an acknowledgement is answered without error only
// once the record is done for good (ACKNOWLEDGED or ARCHIVED, written
// through the share coordinator: SharePartition completes it after
// WriteShareGroupState). Done by this acknowledgement, or already done:
// Kafka's SharePartition.acknowledge skips batches wholly below the
// share-partition start offset ("already archived") and answers them
// without error, and so does Fjord (group/sharepart Acknowledge), so a
// consumer whose lock was taken from it (its session ended, the leader
// changed) and whose record another consumer then accepted gets a
// success for its late ACCEPT. So the rule: once an acceptance is
// confirmed, the record is never acquired again, by anyone; a delivery
// acquired after the confirmation is a violation (one acquired between
// the accepted delivery's acquisition and the confirmation is allowed).
// A failed or unknown acknowledgement promises nothing either way: the
// record may come back, or the acknowledgement may have been applied
// before the error (the state written, the answer lost). It returns the
// violations.
func (l *shareLog) checkAcceptedStayDone() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k, ids := range l.byKey {
		for _, i := range ids {
			d := l.all[i]
			if d.ack != kgo.AckAccept || d.outcome != ackConfirmed {
				continue
			}
			for _, j := range ids {
				if e := l.all[j]; j != i && e.acquired.After(d.confirmed) {
					out = append(out, fmt.Sprintf("p%d@%d accepted by %v, acquired again after that: %v", k.p, k.off, d, e))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// shareNet is a share consumer's network, which the test can take away:
// Cut closes every connection (the broker sees them end, as when a
// process dies and its kernel closes its sockets); Freeze keeps them open
// but silent (what goes out is dropped, what comes in is lost), as when a
// host hangs or is cut off without a reset. After either, every dial
// fails.
type shareNet struct {
	mu     sync.Mutex
	conns  []net.Conn // every real connection made
	cut    bool
	frozen bool
}

var errShareNetDown = errors.New("shareNet: network taken away")

func (n *shareNet) dial(ctx context.Context, network, host string) (net.Conn, error) {
	if n.down() {
		return nil, errShareNetDown
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut || n.frozen {
		c.Close()
		return nil, errShareNetDown
	}
	n.conns = append(n.conns, c)
	return &shareConn{Conn: c, n: n}, nil
}

func (n *shareNet) down() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut || n.frozen
}

func (n *shareNet) isFrozen() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.frozen
}

// Cut closes every connection and fails every later dial.
func (n *shareNet) Cut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut = true
	for _, c := range n.conns {
		c.Close()
	}
}

// Freeze silences every connection and fails every later dial.
func (n *shareNet) Freeze() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.frozen = true
}

// Release closes every real connection (test clean-up).
func (n *shareNet) Release() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		c.Close()
	}
}

// shareConn is a connection of a shareNet. Frozen, it drops writes,
// discards what it reads (reporting only errors: deadlines, closes), and
// leaves the real connection open when franz-go closes it, so the broker
// never learns the client is gone.
type shareConn struct {
	net.Conn
	n *shareNet
}

func (c *shareConn) Read(b []byte) (int, error) {
	for {
		k, err := c.Conn.Read(b)
		if !c.n.isFrozen() {
			return k, err
		}
		if err != nil {
			return 0, err
		}
	}
}

func (c *shareConn) Write(b []byte) (int, error) {
	if c.n.isFrozen() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *shareConn) Close() error {
	if c.n.isFrozen() {
		return nil
	}
	return c.Conn.Close()
}

// shareMember is one franz-go share consumer with a poll loop that
// decides each record's acknowledgement (decide; nil accepts everything),
// logs the delivery, acknowledges it, and flushes the poll's
// acknowledgements (FlushAcks) before polling again, so that the results
// kgo.ShareAckCallback reports in between are those of this poll's
// acknowledgements (per partition: franz-go reports outcomes per
// partition and request, not per record).
type shareMember struct {
	t      testing.TB
	name   string
	topic  string
	cl     *kgo.Client
	net    *shareNet
	log    *shareLog
	decide func(*kgo.Record) kgo.AckStatus

	mu       sync.Mutex
	flushing map[int32][]ackResult // results of the poll being flushed, by partition; nil between flushes
	events   []string              // poll and flush errors, results outside a flush

	cancel context.CancelFunc
	done   chan struct{}
}

// startShareMember starts a share consumer of topic in group, reaching
// the cluster through seeds.
func startShareMember(t testing.TB, name string, seeds []string, group, topic string, log *shareLog, decide func(*kgo.Record) kgo.AckStatus, opts ...kgo.Opt) *shareMember {
	t.Helper()
	m := &shareMember{t: t, name: name, topic: topic, net: &shareNet{}, log: log, decide: decide, done: make(chan struct{})}
	base := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID(name),
		kgo.Dialer(m.net.dial),
		kgo.ShareGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ShareAckCallback(m.onAck),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.DialTimeout(2 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.MetadataMinAge(250 * time.Millisecond),
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

func (m *shareMember) onAck(_ *kgo.Client, rs kgo.ShareAckResults) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range rs {
		switch {
		case r.Topic != m.topic:
		case m.flushing != nil:
			m.flushing[r.Partition] = append(m.flushing[r.Partition], ackResult{r.Err, time.Now()})
		case r.Err != nil:
			m.noteLocked("ack result outside a flush: p%d: %v", r.Partition, r.Err)
		}
	}
}

func (m *shareMember) noteLocked(format string, args ...any) {
	if len(m.events) < 50 {
		m.events = append(m.events, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	}
}

func (m *shareMember) note(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.noteLocked(format, args...)
}

func (m *shareMember) loop(ctx context.Context) {
	defer close(m.done)
	for {
		fs := m.cl.PollFetches(ctx)
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
				m.note("poll %s[%d]: %v", tp, p, err)
			}
		})
		if recs := fs.Records(); len(recs) > 0 {
			m.process(ctx, recs)
		}
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
	}
}

func (m *shareMember) process(ctx context.Context, recs []*kgo.Record) {
	now := time.Now()
	m.mu.Lock()
	m.flushing = map[int32][]ackResult{}
	m.mu.Unlock()
	ids := make([]int, 0, len(recs))
	for _, r := range recs {
		st := kgo.AckAccept
		if m.decide != nil {
			st = m.decide(r)
		}
		ids = append(ids, m.log.add(shareDelivery{
			member: m.name, key: recKey{r.Partition, r.Offset}, value: string(r.Value),
			dc: r.DeliveryCount(), acquired: r.AcquisitionDeadline().Add(-m.log.lock), polled: now, ack: st,
		}))
		if st != 0 {
			r.Ack(st)
		}
	}
	// FlushAcks returns once every acknowledgement handed to the client
	// has had its callback. A flush that does not finish (a broker gone)
	// is retried (for 30 s, or until the member stops); the results of
	// its acknowledgements then still arrive before the next flush
	// returns and count for both polls, which can only turn a
	// confirmation into a failure, never the reverse.
	for attempt := 1; ; attempt++ {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := m.cl.FlushAcks(fctx)
		cancel()
		if err == nil {
			break
		}
		m.note("FlushAcks (attempt %d): %v", attempt, err)
		if attempt == 6 || ctx.Err() != nil {
			break
		}
	}
	m.mu.Lock()
	results := m.flushing
	m.flushing = nil
	m.mu.Unlock()
	m.log.settle(ids, results)
}

// StopPolling ends the poll loop and waits for it.
func (m *shareMember) StopPolling() {
	m.cancel()
	<-m.done
}

// Close stops polling and closes the client (which releases what it
// holds and leaves the group), giving up after timeout.
func (m *shareMember) Close(timeout time.Duration) {
	m.StopPolling()
	done := make(chan struct{})
	go func() { m.cl.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		m.t.Logf("%s: client Close did not return within %v", m.name, timeout)
		m.net.Release()
	}
}

// Events returns the member's poll and flush errors.
func (m *shareMember) Events() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.events) == 0 {
		return m.name + ": no poll or flush errors"
	}
	return m.name + ":\n  " + strings.Join(m.events, "\n  ")
}

// shareGroupView is what ShareGroupDescribe tells of a group.
type shareGroupView struct {
	state           string
	epoch           int32
	assignmentEpoch int32
	members         map[string]shareMemberView // by member id
}

type shareMemberView struct {
	client   string
	epoch    int32
	assigned []int32 // partitions of the test's topic
}

func (v shareGroupView) String() string {
	var ms []string
	for id, m := range v.members {
		ms = append(ms, fmt.Sprintf("%s(%s…) epoch %d %v", m.client, id[:min(6, len(id))], m.epoch, m.assigned))
	}
	sort.Strings(ms)
	return fmt.Sprintf("%s, group epoch %d, assignment epoch %d, %d members: %s", v.state, v.epoch, v.assignmentEpoch, len(v.members), strings.Join(ms, ", "))
}

// describeShareGroup sends ShareGroupDescribe for group through cl (which
// routes it to the group's coordinator).
func describeShareGroup(cl *kgo.Client, group string) (shareGroupView, error) {
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return shareGroupView{}, err
	}
	if len(resp.Groups) != 1 {
		return shareGroupView{}, fmt.Errorf("%d groups described", len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		msg := ""
		if g.ErrorMessage != nil {
			msg = *g.ErrorMessage
		}
		return shareGroupView{}, fmt.Errorf("%w (%s)", err, msg)
	}
	v := shareGroupView{state: g.GroupState, epoch: g.GroupEpoch, assignmentEpoch: g.AssignmentEpoch, members: map[string]shareMemberView{}}
	for _, m := range g.Members {
		var ps []int32
		for _, tp := range m.Assignment.TopicPartitions {
			ps = append(ps, tp.Partitions...)
		}
		v.members[m.MemberID] = shareMemberView{client: m.ClientID, epoch: m.MemberEpoch, assigned: sorted32(ps)}
	}
	return v, nil
}

// listGroupsOfType sends ListGroups v5 with TypesFilter types to every
// address (each node lists the groups it coordinates) and returns group
// id -> type.
func listGroupsOfType(t testing.TB, addrs []string, types ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, addr := range addrs {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.TypesFilter = 5, types
		resp := dialRaw(t, addr).roundTrip(t, req).(*kmsg.ListGroupsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			t.Fatalf("ListGroups v5 %q at %s: %v", types, addr, err)
		}
		for _, g := range resp.Groups {
			out[g.Group] = g.GroupType
		}
	}
	return out
}

// topicIDString is a topic id as Kafka writes it (Uuid.toString): URL-safe
// base64 without padding.
func topicIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// shareCoordinatorKey is the FindCoordinator key (type 2) of a
// share-partition, as Kafka's SharePartitionKey.asCoordinatorKey forms it.
func shareCoordinatorKey(group string, topicID [16]byte, p int32) string {
	return group + ":" + topicIDString(topicID) + ":" + strconv.Itoa(int(p))
}

// findShareCoordinator asks FindCoordinator (key type 2) through cl for
// the share coordinator of share-partition (group, topicID, p).
func findShareCoordinator(ctx context.Context, cl *kgo.Client, group string, topicID [16]byte, p int32) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 2
	key := shareCoordinatorKey(group, topicID, p)
	req.CoordinatorKey, req.CoordinatorKeys = key, []string{key}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if len(resp.Coordinators) != 1 {
		return -1, fmt.Errorf("FindCoordinator %q: %d coordinators", key, len(resp.Coordinators))
	}
	c := resp.Coordinators[0]
	if err := kerr.ErrorForCode(c.ErrorCode); err != nil {
		return -1, fmt.Errorf("FindCoordinator %q: %w", key, err)
	}
	return c.NodeID, nil
}

// shareStartOffset reads share-partition (group, topicID, p)'s start
// offset (SPSO: every record below it is acknowledged or archived) from
// its share coordinator with ReadShareGroupStateSummary, the read-only
// request behind Kafka's DescribeShareGroupOffsets, through cl. -1: no
// state.
func shareStartOffset(ctx context.Context, cl *kgo.Client, group string, topicID [16]byte, p int32) (int64, error) {
	node, err := findShareCoordinator(ctx, cl, group, topicID, p)
	if err != nil {
		return -1, err
	}
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.GroupID = group
	rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
	rp.Partition = p
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Broker(int(node)).Request(ctx, req)
	if err != nil {
		return -1, fmt.Errorf("ReadShareGroupStateSummary at node %d: %w", node, err)
	}
	resp := kresp.(*kmsg.ReadShareGroupStateSummaryResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("ReadShareGroupStateSummary at node %d: %+v", node, resp)
	}
	sp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
		return -1, fmt.Errorf("ReadShareGroupStateSummary at node %d: %w", node, err)
	}
	return sp.StartOffset, nil
}

// awaitShareDone waits until every share-partition of topic in group has
// its start offset at the partition's end offset (ends): every record
// acknowledged or archived.
func awaitShareDone(t testing.TB, cl *kgo.Client, group string, topicID [16]byte, ends map[int32]int64, timeout time.Duration) {
	t.Helper()
	waitUntil(t, timeout, "every share-partition's start offset at its end offset", func() (bool, string) {
		ok := true
		var desc []string
		for _, p := range sorted32(keys32(ends)) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			so, err := shareStartOffset(ctx, cl, group, topicID, p)
			cancel()
			if err != nil || so != ends[p] {
				ok = false
			}
			desc = append(desc, fmt.Sprintf("p%d start %d end %d err %v", p, so, ends[p], err))
		}
		return ok, strings.Join(desc, "; ")
	})
}

func keys32[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
