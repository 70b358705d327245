package compattests

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactions with franz-go against one node and against three at RF 3:
// committed records are visible to read_committed consumers and aborted
// ones are not (but are to read_uncommitted), a new producer with the same
// transactional id fences the old one, and a consume-transform-produce
// chain (GroupTransactSession) copies every input record exactly once.
func TestTxnFranz(t *testing.T) {
	for _, topo := range []struct {
		name  string
		seeds func(t *testing.T) []string
		rf    int16
	}{
		{"one node", func(t *testing.T) []string {
			return []string{startBroker(t, t.TempDir(), "group.initial.rebalance.delay.ms=0").Addr}
		}, 1},
		{"three nodes", func(t *testing.T) []string {
			return startCluster(t, 3, "group.initial.rebalance.delay.ms=0").Addrs()
		}, 3},
	} {
		t.Run(topo.name, func(t *testing.T) {
			seeds := topo.seeds(t)
			t.Run("commit and abort", func(t *testing.T) { testTxnCommitAbort(t, seeds, topo.rf) })
			t.Run("fencing", func(t *testing.T) { testTxnFencing(t, seeds, topo.rf) })
			for _, bal := range []struct {
				name   string
				b      kgo.GroupBalancer
				static bool
			}{
				{"range", kgo.RangeBalancer(), false},
				{"sticky", kgo.StickyBalancer(), false},
				{"cooperative-sticky", kgo.CooperativeStickyBalancer(), false},
				{"cooperative-sticky static members", kgo.CooperativeStickyBalancer(), true},
			} {
				t.Run("consume-transform-produce "+bal.name, func(t *testing.T) { testTxnChain(t, seeds, topo.rf, bal.b, bal.static) })
			}
		})
	}
}

func txnAdmin(t *testing.T, seeds []string) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func txnCreate(t *testing.T, seeds []string, topic string, partitions int32, rf int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := txnAdmin(t, seeds).CreateTopic(ctx, partitions, rf, nil, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

func txnProducer(t *testing.T, seeds []string, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.TransactionalID(id),
		kgo.TransactionTimeout(20 * time.Second), kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// readTopic reads topic from the start until want records have come, then
// for a further second and a half so that records beyond want show, and
// returns the values read.
func readTopic(t *testing.T, seeds []string, topic string, committed bool, want int) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []string
	var extra <-chan time.Time
	for {
		pctx := ctx
		if extra != nil {
			var c context.CancelFunc
			pctx, c = context.WithTimeout(ctx, 300*time.Millisecond)
			defer c()
		}
		fs := cl.PollFetches(pctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s (committed %v): %d of %d records", topic, committed, len(out), want)
		}
		fs.EachError(func(_ string, p int32, err error) {
			if pctx.Err() == nil {
				t.Fatalf("fetch %s[%d]: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
		if len(out) >= want && extra == nil {
			extra = time.After(1500 * time.Millisecond)
		}
		if extra != nil {
			select {
			case <-extra:
				return out
			default:
			}
		}
	}
}

func testTxnCommitAbort(t *testing.T, seeds []string, rf int16) {
	topic := fmt.Sprintf("txn-ca-%d", time.Now().UnixNano())
	txnCreate(t, seeds, topic, 3, rf)
	cl := txnProducer(t, seeds, topic+"-producer")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var want []string
	for round := range 6 {
		commit := round%2 == 0
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("begin %d: %v", round, err)
		}
		for i := range 20 {
			v := fmt.Sprintf("r%d-%d", round, i)
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			if commit {
				want = append(want, v)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %d (commit %v): %v", round, commit, err)
		}
	}
	got := readTopic(t, seeds, topic, true, len(want))
	if strings.Join(sorted(got), ",") != strings.Join(sorted(want), ",") {
		t.Fatalf("read_committed got %d records, want the %d committed ones:\n got %v\nwant %v", len(got), len(want), sorted(got), sorted(want))
	}
	all := readTopic(t, seeds, topic, false, 120)
	if len(all) != 120 {
		t.Fatalf("read_uncommitted got %d records, want all 120 (aborted ones included)", len(all))
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func testTxnFencing(t *testing.T, seeds []string, rf int16) {
	topic := fmt.Sprintf("txn-fence-%d", time.Now().UnixNano())
	txnCreate(t, seeds, topic, 1, rf)
	id := topic + "-producer"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old := txnProducer(t, seeds, id)
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A new producer with the same id fences the old one and aborts its
	// open transaction.
	fresh := txnProducer(t, seeds, id)
	if err := fresh.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("fresh")}).FirstErr(); err != nil {
		t.Fatalf("the new producer: %v", err)
	}
	if err := fresh.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the new producer's commit: %v", err)
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed")
	}
	got := readTopic(t, seeds, topic, true, 1)
	if strings.Join(got, ",") != "fresh" {
		t.Fatalf("read_committed: %v, want only the new producer's record", got)
	}
}

// testTxnChain copies an input topic to an output topic through a
// GroupTransactSession (two members with balancer bal, static members with
// instance ids if static), then checks every input value is in the output
// exactly once (read_committed).
func testTxnChain(t *testing.T, seeds []string, rf int16, bal kgo.GroupBalancer, static bool) {
	in := fmt.Sprintf("txn-in-%d", time.Now().UnixNano())
	out := in + "-out"
	txnCreate(t, seeds, in, 4, rf)
	txnCreate(t, seeds, out, 4, rf)
	const n = 400
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	src, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := range n {
		if err := src.ProduceSync(ctx, &kgo.Record{Topic: in, Key: []byte(strconv.Itoa(i % 17)), Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	group := in + "-group"
	var wg sync.WaitGroup
	var mu sync.Mutex
	copied := 0
	errs := make(chan error, 2)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	for m := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.TransactionalID(fmt.Sprintf("%s-m%d", in, m)),
				kgo.TransactionTimeout(20 * time.Second), kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
				kgo.Balancers(bal), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RequireStableFetchOffsets()}
			if static {
				opts = append(opts, kgo.InstanceID(fmt.Sprintf("%s-instance-%d", in, m)))
			}
			s, err := kgo.NewGroupTransactSession(opts...)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			for cctx.Err() == nil {
				fs := s.PollFetches(cctx)
				if cctx.Err() != nil {
					return
				}
				recs := fs.Records()
				if len(recs) == 0 {
					continue
				}
				if err := s.Begin(); err != nil {
					errs <- fmt.Errorf("begin: %w", err)
					return
				}
				for _, r := range recs {
					s.Produce(cctx, &kgo.Record{Topic: out, Key: r.Key, Value: r.Value}, nil)
				}
				committed, err := s.End(cctx, kgo.TryCommit)
				if err != nil {
					errs <- fmt.Errorf("end: %w", err)
					return
				}
				if committed {
					mu.Lock()
					copied += len(recs)
					mu.Unlock()
				}
			}
		}()
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		mu.Lock()
		c := copied
		mu.Unlock()
		if c >= n {
			break
		}
		select {
		case err := <-errs:
			t.Fatalf("a member failed: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("copied %d of %d records in 90 s", c, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	wg.Wait()
	got := readTopic(t, seeds, out, true, n)
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for i := range n {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("input %d is in the output %d times, want exactly once", i, c)
		}
	}
	if len(got) != n {
		t.Errorf("output has %d committed records, want %d", len(got), n)
	}
}
