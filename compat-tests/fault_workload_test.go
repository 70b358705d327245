package compattests

// The workload of the fault tests: an idempotent acks=all producer that
// logs every record's outcome, consumer group members that log what they
// processed, and the readers that run once the cluster has healed (a fresh
// consumer reading every partition, a new group member resuming from the
// group's commits).

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// faultKeys is the number of distinct keys (k0..k63).
const faultKeys = 64

// faultProducer writes keyed records (key k<seq%64>, value seq) at a steady
// rate and records every outcome.
type faultProducer struct {
	t       testing.TB
	cl      *kgo.Client
	logPath string

	mu       sync.Mutex
	history  []faultAttempt
	dataLoss []string // partitions where franz-go detected data loss

	stop chan struct{}
	done chan struct{}
}

// faultDeliveryTimeout is the producer's RecordDeliveryTimeout: none by
// default, FJORD_FAULT_DELIVERY_TIMEOUT (a Go duration, e.g. 20s) to set one.
//
// Why none: franz-go v1.21.7's idempotent producer can acknowledge a record
// that was never written once a delivery timeout has failed an earlier
// batch. A batch whose request was written but whose connection then died
// (its leader was killed) has an unknown outcome; franz-go forgets that as
// soon as a retry gets any answer (say NOT_ENOUGH_REPLICAS from the new
// leader), lets the delivery timeout fail it, and rewinds the partition's
// sequence number to the failed batch's without bumping the producer epoch.
// The next records reuse those sequence numbers; if the failed batch had in
// fact been appended, the broker (as Kafka does) takes the new batch for a
// duplicate of it and answers with the old batch's offset, so the new
// records are acknowledged at an offset that holds the failed ones, and are
// in the log nowhere. The broker cannot tell: the producer id, epoch and
// sequence numbers are the same. (Reproduced against franz-go's own kfake;
// checkFaultHistory names this pattern when it finds it.) Without a
// delivery timeout franz-go never fails a batch it may have written, and
// every acknowledgement stands for what was written.
func faultDeliveryTimeout(t testing.TB) time.Duration {
	v := os.Getenv("FJORD_FAULT_DELIVERY_TIMEOUT")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("FJORD_FAULT_DELIVERY_TIMEOUT=%q: %v", v, err)
	}
	return d
}

// startFaultProducer starts producing rate records per second to topic
// through every node of fc. franz-go's own log (info level) goes to a file
// in logDir.
func startFaultProducer(t testing.TB, fc *faultCluster, topic string, rate int, logDir string) *faultProducer {
	t.Helper()
	p := &faultProducer{t: t, logPath: filepath.Join(logDir, "producer.log"), stop: make(chan struct{}), done: make(chan struct{})}
	lf, err := os.Create(p.logPath)
	if err != nil {
		t.Fatalf("producer log: %v", err)
	}
	t.Cleanup(func() { lf.Close() })
	level := kgo.LogLevelInfo
	if os.Getenv("FJORD_FAULT_DEBUG") != "" {
		level = kgo.LogLevelDebug // every produce request and response
	}
	cl, err := kgo.NewClient(fc.seeds(
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(1<<30),
		kgo.RecordDeliveryTimeout(faultDeliveryTimeout(t)), // 0: none
		kgo.ProduceRequestTimeout(5*time.Second),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.DialTimeout(2*time.Second),
		kgo.ProducerOnDataLossDetected(func(topic string, part int32) {
			p.mu.Lock()
			p.dataLoss = append(p.dataLoss, fmt.Sprintf("%s %s[%d]", time.Now().Format("15:04:05.000"), topic, part))
			p.mu.Unlock()
		}),
		kgo.WithLogger(kgo.BasicLogger(lf, level, func() string { return time.Now().Format("15:04:05.000000 ") })),
	)...)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	p.cl = cl
	t.Cleanup(cl.Close)
	go p.loop(topic, rate)
	return p
}

func (p *faultProducer) loop(topic string, rate int) {
	defer close(p.done)
	const tick = 10 * time.Millisecond
	perTick := max(1, rate/int(time.Second/tick))
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tk.C:
		}
		for range perTick {
			p.mu.Lock()
			seq := int64(len(p.history))
			a := faultAttempt{Seq: seq, Key: "k" + strconv.Itoa(int(seq%faultKeys)), Sent: time.Now(), Partition: -1, Offset: -1}
			p.history = append(p.history, a)
			p.mu.Unlock()
			r := &kgo.Record{Topic: topic, Key: []byte(a.Key), Value: []byte(strconv.FormatInt(seq, 10))}
			// Blocks while the client buffers 10000 records (an outage):
			// the rate drops, nothing is failed for it.
			p.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				now := time.Now()
				p.mu.Lock()
				defer p.mu.Unlock()
				h := &p.history[seq]
				h.Done = now
				h.Outcome = classifyProduceErr(err)
				if err != nil {
					h.Err = err.Error()
				} else {
					h.Partition, h.Offset = r.Partition, r.Offset
				}
			})
		}
	}
}

// Stop stops producing and waits up to flushTimeout for every record's
// outcome; records still without one are left pending (indefinite) and the
// client is closed.
func (p *faultProducer) Stop(flushTimeout time.Duration) {
	close(p.stop)
	select {
	case <-p.done:
	case <-time.After(flushTimeout):
		p.t.Logf("producer: still blocked in Produce after %v", flushTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := p.cl.Flush(ctx); err != nil {
		p.t.Logf("producer: flush did not finish within %v: %v", flushTimeout, err)
	}
	p.cl.Close()
	<-p.done
}

// History returns a copy of the history so far.
func (p *faultProducer) History() []faultAttempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.history)
}

// Acked returns how many records have been acknowledged so far.
func (p *faultProducer) Acked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, a := range p.history {
		if a.Outcome == faultAcked {
			n++
		}
	}
	return n
}

// Busiest returns the partition with the most acknowledged records.
func (p *faultProducer) Busiest() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := map[int32]int{}
	for _, a := range p.history {
		if a.Outcome == faultAcked {
			n[a.Partition]++
		}
	}
	best := int32(0)
	for part, c := range n {
		if c > n[best] || (c == n[best] && part < best) {
			best = part
		}
	}
	return best
}

// DataLoss returns franz-go's data loss detections.
func (p *faultProducer) DataLoss() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.dataLoss)
}

// logLines returns the producer log lines containing any of subs (at most
// max, the last ones).
func (p *faultProducer) logLines(max int, subs ...string) string {
	data, _ := os.ReadFile(p.logPath)
	var keep []string
	for _, l := range strings.Split(string(data), "\n") {
		if slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(l, s) }) {
			keep = append(keep, l)
		}
	}
	if len(keep) > max {
		keep = keep[len(keep)-max:]
	}
	return strings.Join(keep, "\n")
}

// faultMember is one consumer group member: it polls, logs and marks every
// record it processes; marks are committed every 500ms and on revoke.
type faultMember struct {
	name string
	cl   *kgo.Client

	mu       sync.Mutex
	consumed []faultRecord
	// ackedCommits is, per partition, the highest offset a commit of
	// this member was acknowledged for: the group's committed offset may
	// never be found below it afterwards.
	ackedCommits map[int32]int64
	commits      int
	commitErrs   []string // the first few
	commitErrN   int
	pollErrs     int

	cancel context.CancelFunc
	done   chan struct{}
}

func startFaultMember(t testing.TB, fc *faultCluster, name, group, topic string) *faultMember {
	t.Helper()
	m := &faultMember{name: name, done: make(chan struct{}), ackedCommits: map[int32]int64{}}
	cl, err := kgo.NewClient(fc.seeds(
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(groupSessionTimeout),
		kgo.HeartbeatInterval(groupHeartbeat),
		kgo.RebalanceTimeout(15*time.Second),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(500*time.Millisecond),
		kgo.AutoCommitCallback(func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if err == nil && resp != nil {
				for _, tp := range resp.Topics {
					for _, pp := range tp.Partitions {
						if pp.ErrorCode != 0 {
							err = fmt.Errorf("partition %d: %w", pp.Partition, kerr.ErrorForCode(pp.ErrorCode))
						}
					}
				}
				if err == nil && req != nil {
					for _, rt := range req.Topics {
						for _, rp := range rt.Partitions {
							if rt.Topic == topic && rp.Offset > m.ackedCommits[rp.Partition] {
								m.ackedCommits[rp.Partition] = rp.Offset
							}
						}
					}
				}
			}
			if err != nil {
				m.commitErrN++
				if len(m.commitErrs) < 5 {
					m.commitErrs = append(m.commitErrs, time.Now().Format("15:04:05.000 ")+err.Error())
				}
				return
			}
			m.commits++
		}),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.DialTimeout(2*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
	)...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m.cl = cl
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.loop(ctx)
	return m
}

func (m *faultMember) loop(ctx context.Context) {
	defer close(m.done)
	for {
		fs := m.cl.PollRecords(ctx, 1000)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(string, int32, error) {
			m.mu.Lock()
			m.pollErrs++
			m.mu.Unlock()
		})
		recs := fs.Records()
		m.mu.Lock()
		for _, r := range recs {
			m.consumed = append(m.consumed, faultRecordOf(r))
		}
		m.mu.Unlock()
		m.cl.MarkCommitRecords(recs...)
	}
}

// Leave stops polling, commits what was processed and leaves the group.
func (m *faultMember) Leave(t testing.TB) {
	m.cancel()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := m.cl.CommitMarkedOffsets(ctx); err != nil {
		t.Logf("%s: final commit: %v", m.name, err)
	}
	done := make(chan struct{})
	go func() { m.cl.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Logf("%s: Close did not return within 20s", m.name)
	}
}

// AckedCommits is, per partition, the highest offset this member's
// acknowledged commits carried.
func (m *faultMember) AckedCommits() map[int32]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.ackedCommits)
}

func (m *faultMember) Consumed() []faultRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.consumed)
}

func (m *faultMember) Summary() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := fmt.Sprintf("%s: processed %d records, %d commits, %d poll errors", m.name, len(m.consumed), m.commits, m.pollErrs)
	if m.commitErrN > 0 {
		s += fmt.Sprintf(", %d failed commits (first %d: %s)", m.commitErrN, len(m.commitErrs), strings.Join(m.commitErrs, "; "))
	}
	return s
}

// readUntilEnds polls cl until every partition has returned its record at
// offset ends[p]-1, or timeout passes; it returns the records in the order
// read and the fetch errors seen.
func readUntilEnds(cl *kgo.Client, ends map[int32]int64, timeout time.Duration) ([]faultRecord, []string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	next := map[int32]int64{}
	done := func() bool {
		for p, e := range ends {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	var out []faultRecord
	var errs []string
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, errs, fmt.Errorf("after %v: read up to %s, want %s", timeout, fmtOffsets(next), fmtOffsets(ends))
		}
		fs.EachError(func(tp string, p int32, err error) {
			if len(errs) < 20 {
				errs = append(errs, fmt.Sprintf("%s[%d]: %v", tp, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, faultRecordOf(r))
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
		})
	}
	return out, errs, nil
}

// readBack reads every partition of topic from offset 0 to its end with a
// fresh consumer (no group).
func (fc *faultCluster) readBack(t testing.TB, topic string, ends map[int32]int64) []faultRecord {
	t.Helper()
	starts := map[int32]kgo.Offset{}
	for p := range ends {
		starts[p] = kgo.NewOffset().At(0)
	}
	cl := newClient(t, fc.AllAddrs()[0], fc.seeds(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	defer cl.Close()
	out, errs, err := readUntilEnds(cl, ends, 60*time.Second)
	if len(errs) > 0 {
		t.Logf("read-back fetch errors: %s", strings.Join(errs, "; "))
	}
	if err != nil {
		t.Errorf("reading %q back: %v", topic, err)
	}
	return out
}

// resumeGroup starts a new member of group after the others left and reads
// from the committed offsets to the ends.
func (fc *faultCluster) resumeGroup(t testing.TB, group, topic string, ends map[int32]int64) []faultRecord {
	t.Helper()
	cl := newClient(t, fc.AllAddrs()[0], fc.seeds(
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(groupSessionTimeout), kgo.HeartbeatInterval(groupHeartbeat),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))...)
	defer cl.Close()
	// Partitions whose committed offset is already the end have nothing
	// to return; readUntilEnds must not wait for them.
	committed := fc.committed(t, group, topic)
	want := map[int32]int64{}
	for p, e := range ends {
		if committed[p] < e {
			want[p] = e
		}
	}
	out, errs, err := readUntilEnds(cl, want, 60*time.Second)
	if len(errs) > 0 {
		t.Logf("resuming member fetch errors: %s", strings.Join(errs, "; "))
	}
	if err != nil {
		t.Errorf("resuming group %s: %v", group, err)
	}
	return out
}

// committed returns group's committed offsets for topic.
func (fc *faultCluster) committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(newClient(t, fc.AllAddrs()[0], fc.seeds()...))
	return committedOffsets(t, adm, group, topic)
}
