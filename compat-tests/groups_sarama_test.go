package compattests

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// saramaGroupState is shared by the members of one sarama consumer group.
type saramaGroupState struct {
	topic      string
	partitions int

	mu       sync.Mutex
	claims   map[string][]int32 // member -> partitions of its current session
	gens     map[string]int32
	consumed map[recKey]string
	seen     map[recKey]int
	byMember map[string]map[int32]int
	errs     []string
	events   []string

	splitOnce sync.Once
	split     chan struct{}
	splitDesc string
}

// saramaHandler is one member's ConsumerGroupHandler. It holds back
// processing until the partitions are split between both members, so that
// both members consume.
type saramaHandler struct {
	name string
	st   *saramaGroupState
}

func (h *saramaHandler) Setup(sess sarama.ConsumerGroupSession) error {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	ps := sorted32(sess.Claims()[st.topic])
	st.claims[h.name] = ps
	st.gens[h.name] = sess.GenerationID()
	st.events = append(st.events, fmt.Sprintf("%s setup gen %d member %s claims %v", h.name, sess.GenerationID(), sess.MemberID(), ps))
	if len(st.claims) != 2 {
		return nil
	}
	owner := map[int32]string{}
	var gen int32 = -1
	var desc []string
	for m, ps := range st.claims {
		if len(ps) == 0 {
			return nil
		}
		if gen != -1 && st.gens[m] != gen {
			return nil
		}
		gen = st.gens[m]
		for _, p := range ps {
			if _, dup := owner[p]; dup {
				return nil
			}
			owner[p] = m
		}
		desc = append(desc, fmt.Sprintf("%s=%v", m, ps))
	}
	if len(owner) == st.partitions {
		sort.Strings(desc)
		st.splitOnce.Do(func() {
			st.splitDesc = fmt.Sprintf("generation %d: %s", gen, strings.Join(desc, " "))
			close(st.split)
		})
	}
	return nil
}

func (h *saramaHandler) Cleanup(sess sarama.ConsumerGroupSession) error {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	delete(h.st.claims, h.name)
	h.st.events = append(h.st.events, fmt.Sprintf("%s cleanup gen %d", h.name, sess.GenerationID()))
	return nil
}

func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	st := h.st
	select {
	case <-st.split:
	case <-sess.Context().Done():
		return nil
	}
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			st.mu.Lock()
			k := recKey{msg.Partition, msg.Offset}
			st.consumed[k] = string(msg.Value)
			st.seen[k]++
			if st.byMember[h.name] == nil {
				st.byMember[h.name] = map[int32]int{}
			}
			st.byMember[h.name][msg.Partition]++
			st.mu.Unlock()
			sess.MarkMessage(msg, "")
		case <-sess.Context().Done():
			return nil
		}
	}
}

// TestGroupSarama: two sarama ConsumerGroup members split a topic's
// partitions, consume every record and commit; kadm then reads the
// committed offsets at the end of every partition.
func TestGroupSarama(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version sarama.KafkaVersion
	}{
		{"V2_1_0_0", sarama.V2_1_0_0},
		{"MaxVersion", sarama.MaxVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic, group, partitions, n = "sarama-group", "sarama-group", 4, 2000
			b := startBroker(t, t.TempDir(), groupBrokerOverrides...)
			adm := newAdmin(t, b.Addr)
			createTopic(t, adm, topic, partitions, nil)
			acked := produceAcked(t, newClient(t, b.Addr), topic, "sarama", n)
			end := endOffsets(t, adm, topic)

			st := &saramaGroupState{topic: topic, partitions: partitions, claims: map[string][]int32{}, gens: map[string]int32{},
				consumed: map[recKey]string{}, seen: map[recKey]int{}, byMember: map[string]map[int32]int{}, split: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			var groups []sarama.ConsumerGroup
			for _, name := range []string{"sarama-a", "sarama-b"} {
				cfg := sarama.NewConfig()
				cfg.Version = tc.version
				cfg.ClientID = name
				cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
				cfg.Consumer.Offsets.AutoCommit.Enable = true
				cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
				cfg.Consumer.Group.Session.Timeout = groupSessionTimeout
				cfg.Consumer.Group.Heartbeat.Interval = groupHeartbeat
				cfg.Consumer.Group.Rebalance.Timeout = 15 * time.Second
				cfg.Consumer.Return.Errors = true
				cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
				g, err := sarama.NewConsumerGroup([]string{b.Addr}, group, cfg)
				if err != nil {
					t.Fatalf("%s: NewConsumerGroup: %v", name, err)
				}
				groups = append(groups, g)
				h := &saramaHandler{name: name, st: st}
				wg.Add(2)
				go func() {
					defer wg.Done()
					for e := range g.Errors() {
						st.mu.Lock()
						st.errs = append(st.errs, fmt.Sprintf("%s: %v", name, e))
						st.mu.Unlock()
					}
				}()
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						if err := g.Consume(ctx, []string{topic}, h); err != nil {
							st.mu.Lock()
							st.errs = append(st.errs, fmt.Sprintf("%s Consume: %v", name, err))
							st.mu.Unlock()
							if errors.Is(err, sarama.ErrClosedConsumerGroup) {
								return
							}
							time.Sleep(100 * time.Millisecond) // back off before rejoining
						}
					}
				}()
			}
			history := func() string {
				st.mu.Lock()
				defer st.mu.Unlock()
				return fmt.Sprintf("events:\n  %s\nerrors: %v", strings.Join(st.events, "\n  "), st.errs)
			}
			closeAll := func() {
				cancel()
				for i, g := range groups {
					if err := g.Close(); err != nil {
						t.Errorf("member %d Close: %v", i, err)
					}
				}
				wg.Wait()
			}

			select {
			case <-st.split:
				t.Logf("partitions split: %s", st.splitDesc)
			case <-time.After(30 * time.Second):
				closeAll()
				t.Fatalf("the two members never held disjoint non-empty claims covering all %d partitions in one generation within 30s\n%s", partitions, history())
			}
			waitUntil(t, 30*time.Second, "all records consumed", func() (bool, string) {
				st.mu.Lock()
				defer st.mu.Unlock()
				return len(st.consumed) >= len(acked), fmt.Sprintf("%d of %d consumed; %v", len(st.consumed), len(acked), st.byMember)
			})
			closeAll()

			st.mu.Lock()
			missing, dups := 0, 0
			for k, v := range acked {
				if got, ok := st.consumed[k]; !ok {
					missing++
				} else if got != v {
					t.Errorf("p%d@%d: consumed %q, produced %q", k.p, k.off, got, v)
				}
			}
			for _, c := range st.seen {
				dups += c - 1
			}
			t.Logf("consumed per member and partition %v; missing=%d duplicates=%d", st.byMember, missing, dups)
			if len(st.byMember) != 2 {
				t.Errorf("only %d member(s) consumed records: %v", len(st.byMember), st.byMember)
			}
			for m, ps := range st.byMember {
				for p := range ps {
					for m2, ps2 := range st.byMember {
						if m2 != m && ps2[p] > 0 {
							t.Errorf("partition %d consumed by both %s and %s (no rebalance expected after the split)", p, m, m2)
						}
					}
				}
			}
			if len(st.errs) > 0 {
				t.Logf("sarama reported: %v", st.errs)
			}
			st.mu.Unlock()
			if missing > 0 {
				t.Errorf("missing=%d", missing)
			}

			com := committedOffsets(t, adm, group, topic)
			if !sameOffsets(com, end) {
				t.Errorf("after both members closed, committed offsets %s, end offsets %s\n%s", fmtOffsets(com), fmtOffsets(end), history())
			}
		})
	}
}
