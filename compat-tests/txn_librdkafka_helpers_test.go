package compattests

// Shared by the librdkafka transaction tests (txn_kcat_test.go,
// txn_python_test.go): the two topologies they run on and a wait for a
// topic's transactions to be settled.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rdkTopology is where a transaction test runs: one node, or three at
// replication factor 3, as in TestTxnFranz.
type rdkTopology struct {
	name  string
	start func(t *testing.T) []string // the client addresses
	rf    int16
}

var rdkTopologies = []rdkTopology{
	{"one node", func(t *testing.T) []string {
		return []string{startBroker(t, t.TempDir(), "group.initial.rebalance.delay.ms=0").Addr}
	}, 1},
	{"three nodes", func(t *testing.T) []string {
		return startCluster(t, 3, "group.initial.rebalance.delay.ms=0").Addrs()
	}, 3},
}

// rdkTopic is a topic name unique to this run and test.
func rdkTopic(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

// rdkOffsets are a topic's high watermark and last stable offset, by
// partition.
type rdkOffsets struct{ hw, lso map[int32]int64 }

func (o rdkOffsets) String() string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(o.hw)) {
		parts = append(parts, fmt.Sprintf("p%d hw %d lso %d", p, o.hw[p], o.lso[p]))
	}
	return strings.Join(parts, ", ")
}

// hwTotal is the sum of the high watermarks.
func (o rdkOffsets) hwTotal() int64 {
	var n int64
	for _, v := range o.hw {
		n += v
	}
	return n
}

// stable reports whether no partition has an open (or unreplicated)
// transaction: the last stable offset is the high watermark everywhere.
func (o rdkOffsets) stable() bool {
	for p, hw := range o.hw {
		if o.lso[p] != hw {
			return false
		}
	}
	return len(o.hw) > 0
}

// rdkListOffsets asks the brokers (ListOffsets, read_uncommitted and
// read_committed) for topic's high watermarks and last stable offsets.
func rdkListOffsets(adm *kadm.Client, topic string) (rdkOffsets, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := rdkOffsets{hw: map[int32]int64{}, lso: map[int32]int64{}}
	for _, lso := range []bool{false, true} {
		list := adm.ListEndOffsets
		if lso {
			list = adm.ListCommittedOffsets
		}
		lo, err := list(ctx, topic)
		if err == nil {
			err = lo.Error()
		}
		if err != nil {
			return out, err
		}
		lo.Each(func(o kadm.ListedOffset) {
			if lso {
				out.lso[o.Partition] = o.Offset
			} else {
				out.hw[o.Partition] = o.Offset
			}
		})
	}
	return out, nil
}

// rdkAwaitOffsets polls topic's offsets until cond holds, failing the test
// after timeout, and returns the offsets then.
func rdkAwaitOffsets(t *testing.T, seeds []string, topic string, timeout time.Duration, what string, cond func(rdkOffsets) bool) rdkOffsets {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	for {
		o, err := rdkListOffsets(adm, topic)
		if err == nil && cond(o) {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not reached within %v; last offsets: %v (error %v)", topic, what, timeout, o, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rdkWaitStable waits until every transaction on topic is settled (its
// markers written and replicated: LSO = HW on every partition) and returns
// the offsets then. A commit or abort returns to the client once the
// coordinator has decided it; the markers follow.
func rdkWaitStable(t *testing.T, seeds []string, topic string) rdkOffsets {
	t.Helper()
	return rdkAwaitOffsets(t, seeds, topic, 15*time.Second, "LSO = HW on every partition", rdkOffsets.stable)
}

// rdkCountBy counts the values of s by key.
func rdkCountBy[T any, K comparable](s []T, key func(T) K) map[K]int {
	out := map[K]int{}
	for _, v := range s {
		out[key(v)]++
	}
	return out
}

// rdkSameSet reports (as a test error) a difference between got and want,
// both sets of distinct strings; duplicates in got count as a difference.
func rdkSameSet(t *testing.T, what string, got, want []string) bool {
	t.Helper()
	g, w := rdkCountBy(got, func(s string) string { return s }), rdkCountBy(want, func(s string) string { return s })
	var missing, extra, dup []string
	for v := range w {
		if g[v] == 0 {
			missing = append(missing, v)
		}
	}
	for v, n := range g {
		switch {
		case w[v] == 0:
			extra = append(extra, v)
		case n > 1:
			dup = append(dup, fmt.Sprintf("%s x%d", v, n))
		}
	}
	if len(missing)+len(extra)+len(dup) == 0 {
		return true
	}
	short := func(s []string) []string {
		slices.Sort(s)
		if len(s) > 10 {
			return append(s[:10], fmt.Sprintf("... %d more", len(s)-10))
		}
		return s
	}
	t.Errorf("%s: got %d values, want %d: missing %v, unexpected %v, duplicated %v",
		what, len(got), len(want), short(missing), short(extra), short(dup))
	return false
}
