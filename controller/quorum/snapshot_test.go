package quorum

import (
	"bytes"
	"slices"
	"testing"
	"testing/cryptotest"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/fjordlog/fjord/controller"
)

func ptr[T any](v T) *T { return &v }

func tid(b byte) [16]byte { return [16]byte{0xaa, b} }

// logBuilder applies records directly to an image, keeping the shadow
// broker configs as Member does.
type logBuilder struct {
	t   testing.TB
	img *controller.Image
	bc  brokerConfigs
}

func (lb *logBuilder) apply(b controller.Body) {
	lb.t.Helper()
	r := controller.NewRecord(b)
	next, err := lb.img.Apply(lb.img.Version()+1, r)
	if err != nil {
		lb.t.Fatalf("%v: %v", r, err)
	}
	lb.img = next
	lb.bc.apply(r)
}

// richBodies returns a function that yields, given the current image, the
// next record of a log that exercises every part of an image, or nil at
// the end.
func richBodies() func(img *controller.Image) controller.Body {
	i := 0
	epoch := func(img *controller.Image, id int32) int64 { b, _ := img.Broker(id); return b.Epoch }
	steps := []func(img *controller.Image) controller.Body{
		func(*controller.Image) controller.Body { return controller.RegisterBroker{ID: 1} },
		func(*controller.Image) controller.Body {
			return controller.RegisterBroker{ID: 2, Rack: "b", Endpoints: []controller.Endpoint{{Name: "P", Host: "h2", Port: 1}}}
		},
		func(*controller.Image) controller.Body { return controller.RegisterBroker{ID: 3} },
		func(img *controller.Image) controller.Body {
			return controller.UnfenceBroker{ID: 1, Epoch: epoch(img, 1)}
		},
		func(img *controller.Image) controller.Body {
			return controller.UnfenceBroker{ID: 2, Epoch: epoch(img, 2)}
		},
		func(*controller.Image) controller.Body {
			return controller.CreateTopic{Name: "a", ID: tid(1), Configs: map[string]string{"retention.ms": "1000"}}
		},
		func(*controller.Image) controller.Body {
			return controller.CreatePartition{TopicID: tid(1), Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1}
		},
		func(*controller.Image) controller.Body {
			return controller.CreatePartition{TopicID: tid(1), Partition: 1, Replicas: []int32{2, 3}, ISR: []int32{2}, Leader: 2}
		},
		func(*controller.Image) controller.Body {
			return controller.ChangePartition{TopicID: tid(1), Partition: 0, ISR: &[]int32{1}, Leader: ptr(int32(-1))}
		},
		func(*controller.Image) controller.Body {
			return controller.ChangePartition{TopicID: tid(1), Partition: 0, Leader: ptr(int32(1))}
		},
		func(*controller.Image) controller.Body {
			// A reassignment in progress (partition 1 from [2 3] to [3 1]).
			return controller.ChangeReplicas{TopicID: tid(1), Partition: 1, Replicas: []int32{3, 1, 2},
				Adding: []int32{1}, Removing: []int32{2}, ISR: []int32{2}, Leader: 2}
		},
		func(*controller.Image) controller.Body {
			return controller.CreateTopic{Name: "b", ID: tid(2)}
		},
		func(*controller.Image) controller.Body {
			return controller.SetConfig{Resource: controller.TopicResource("b"), Key: "k", Value: ptr("v")}
		},
		func(*controller.Image) controller.Body {
			return controller.SetConfig{Resource: controller.BrokerResource(1), Key: "log.dirs", Value: ptr("/d")}
		},
		func(*controller.Image) controller.Body {
			return controller.SetConfig{Resource: controller.ClusterResource(), Key: "compression", Value: ptr("lz4")}
		},
		func(*controller.Image) controller.Body {
			return controller.SetConfig{Resource: controller.ClusterResource(), Key: "gone", Value: ptr("x")}
		},
		func(*controller.Image) controller.Body {
			return controller.SetConfig{Resource: controller.ClusterResource(), Key: "gone"}
		},
		func(*controller.Image) controller.Body {
			return controller.SetConfig{Resource: controller.GroupResource("g"), Key: "share.auto.offset.reset", Value: ptr("earliest")}
		},
		func(*controller.Image) controller.Body {
			return controller.SetConfig{Resource: controller.GroupResource("g"), Key: "share.isolation.level", Value: ptr("read_committed")}
		},
		func(*controller.Image) controller.Body {
			return controller.SetConfig{Resource: controller.GroupResource("h"), Key: "consumer.session.timeout.ms", Value: ptr("50000")}
		},
		func(*controller.Image) controller.Body {
			return controller.SetConfig{Resource: controller.GroupResource("h"), Key: "consumer.session.timeout.ms"} // h has none left
		},
		func(img *controller.Image) controller.Body {
			return controller.ProducerIDs{Broker: 1, First: img.NextProducerID(), Count: 1000}
		},
		func(img *controller.Image) controller.Body {
			return controller.ProducerIDs{Broker: 2, First: img.NextProducerID(), Count: 1000}
		},
		func(img *controller.Image) controller.Body {
			return controller.FenceBroker{ID: 1, Epoch: epoch(img, 1)}
		},
		func(*controller.Image) controller.Body {
			return controller.RegisterBroker{ID: 3, Incarnation: [16]byte{3}} // re-registration: new epoch
		},
		func(img *controller.Image) controller.Body {
			return controller.UnfenceBroker{ID: 3, Epoch: epoch(img, 3)}
		},
		func(*controller.Image) controller.Body { return controller.RegisterBroker{ID: 9} },
		func(*controller.Image) controller.Body { return controller.UnregisterBroker{ID: 9} },
		func(*controller.Image) controller.Body { return controller.CreateTopic{Name: "c", ID: tid(3)} },
		func(*controller.Image) controller.Body { return controller.DeleteTopic{ID: tid(3)} },
		func(*controller.Image) controller.Body {
			return controller.ClientQuota{Entity: []controller.QuotaEntityPart{{Type: controller.QuotaClientID, Name: ptr("a")}},
				Key: controller.QuotaProducerByteRate, Value: ptr(262144.0)}
		},
		func(*controller.Image) controller.Body {
			return controller.ClientQuota{Entity: []controller.QuotaEntityPart{{Type: controller.QuotaClientID}, {Type: controller.QuotaUser, Name: ptr("u")}},
				Key: controller.QuotaConsumerByteRate, Value: ptr(1e6)}
		},
		func(*controller.Image) controller.Body {
			return controller.ClientQuota{Entity: []controller.QuotaEntityPart{{Type: controller.QuotaIP}},
				Key: controller.QuotaConnectionCreationRate, Value: ptr(10.0)}
		},
		func(*controller.Image) controller.Body {
			return controller.ClientQuota{Entity: []controller.QuotaEntityPart{{Type: controller.QuotaClientID, Name: ptr("a")}},
				Key: controller.QuotaRequestPercentage, Value: ptr(50.0)}
		},
		func(*controller.Image) controller.Body {
			return controller.ClientQuota{Entity: []controller.QuotaEntityPart{{Type: controller.QuotaIP}},
				Key: controller.QuotaConnectionCreationRate} // removed: gone from the snapshot too
		},
		func(*controller.Image) controller.Body {
			return controller.ACLChange{ACL: controller.ACL{ResourceType: 2, Name: "mf.settlement.", PatternType: 4,
				Principal: "User:alice", Host: "*", Operation: 4, Permission: 3}}
		},
		func(*controller.Image) controller.Body {
			return controller.ACLChange{ACL: controller.ACL{ResourceType: 3, Name: "g", PatternType: 3,
				Principal: "User:bob", Host: "10.0.0.1", Operation: 3, Permission: 2}}
		},
		func(*controller.Image) controller.Body {
			return controller.ACLChange{ACL: controller.ACL{ResourceType: 3, Name: "g", PatternType: 3,
				Principal: "User:bob", Host: "10.0.0.1", Operation: 3, Permission: 2}, Remove: true}
		},
		func(*controller.Image) controller.Body {
			return controller.ScramCredential{User: "u", Mechanism: controller.ScramSHA256, Salt: []byte("s"), StoredKey: []byte("a"), ServerKey: []byte("b"), Iterations: 4096}
		},
		func(*controller.Image) controller.Body {
			return controller.ScramCredential{User: "v", Mechanism: controller.ScramSHA512, Salt: []byte("s"), StoredKey: []byte("a"), ServerKey: []byte("b"), Iterations: 4096}
		},
		func(*controller.Image) controller.Body {
			return controller.ScramCredential{User: "v", Mechanism: controller.ScramSHA512, Remove: true}
		},
		// Remote segments of a-0 (leader 1 at epoch 2): one finished, one
		// abandoned and being deleted, one deleted (gone), one in flight;
		// and of a topic deleted since (gone with it).
		func(*controller.Image) controller.Body { return remoteSeg(tid(1), 0, 1, 0, 99) },
		func(*controller.Image) controller.Body {
			return remoteState(tid(1), 0, 1, controller.RemoteCopyFinished)
		},
		func(*controller.Image) controller.Body { return remoteSeg(tid(1), 0, 2, 100, 199) },
		func(*controller.Image) controller.Body {
			return remoteState(tid(1), 0, 2, controller.RemoteDeleteStarted)
		},
		func(*controller.Image) controller.Body { return remoteSeg(tid(1), 0, 3, 100, 149) },
		func(*controller.Image) controller.Body {
			return remoteState(tid(1), 0, 3, controller.RemoteDeleteStarted)
		},
		func(*controller.Image) controller.Body {
			return remoteState(tid(1), 0, 3, controller.RemoteDeleteFinished)
		},
		func(*controller.Image) controller.Body { return remoteSeg(tid(1), 0, 4, 100, 150) },
		func(*controller.Image) controller.Body { return controller.CreateTopic{Name: "d", ID: tid(4)} },
		func(*controller.Image) controller.Body {
			return controller.CreatePartition{TopicID: tid(4), Partition: 0, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2}
		},
		func(*controller.Image) controller.Body { return remoteSeg(tid(4), 0, 5, 0, 9) },
		func(*controller.Image) controller.Body { return controller.DeleteTopic{ID: tid(4)} },
	}
	return func(img *controller.Image) controller.Body {
		if i == len(steps) {
			return nil
		}
		i++
		return steps[i-1](img)
	}
}

// remoteSeg is a segment's COPY_STARTED record; those with an even id
// carry object checksums (body version 2), the others none (version 1),
// so snapshots hold both.
func remoteSeg(topic [16]byte, p int32, id byte, base, end int64) controller.RemoteSegment {
	s := controller.RemoteSegment{TopicID: topic, Partition: p, SegmentID: [16]byte{id}, BaseOffset: base, EndOffset: end,
		MaxTimestamp: 1000 + end, SizeBytes: 10 * (end - base + 1), LeaderEpochs: []controller.EpochStart{{Epoch: 1, StartOffset: base}},
		Broker: 1, LeaderEpoch: 2}
	if id%2 == 0 {
		s.Objects = []controller.ObjectSum{{Kind: controller.ObjectIndex, Size: 8, CRC: uint32(id)}, {Kind: controller.ObjectEpochCheckpoint, Size: 10, CRC: 7}}
	}
	return s
}

func remoteState(topic [16]byte, p int32, id byte, s controller.RemoteSegmentState) controller.RemoteSegmentStateChange {
	return controller.RemoteSegmentStateChange{TopicID: topic, Partition: p, SegmentID: [16]byte{id}, State: s, Broker: 1, LeaderEpoch: 2}
}

func TestSnapshotRoundTrip(t *testing.T) {
	lb := &logBuilder{t: t, img: new(controller.Image), bc: brokerConfigs{}}
	next := richBodies()
	check := func() {
		t.Helper()
		data, err := encodeImage(lb.img, lb.bc)
		if err != nil {
			t.Fatal(err)
		}
		img, bc, err := decodeImage(data, lb.img.Version())
		if err != nil {
			t.Fatal(err)
		}
		if img.Version() != lb.img.Version() {
			t.Fatalf("version %d, want %d", img.Version(), lb.img.Version())
		}
		sameImage(t, img, lb.img)
		for res, m := range lb.bc {
			for k, v := range m {
				got, ok := img.Config(controller.ConfigResource{Type: controller.ResourceBroker, Name: res}, k)
				if !ok || got != v {
					t.Fatalf("config %q/%q = %q, %t; want %q", res, k, got, ok, v)
				}
			}
		}
		for _, k := range []string{"gone", "compression", noopKey} {
			v1, ok1 := img.Config(controller.ClusterResource(), k)
			v2, ok2 := lb.img.Config(controller.ClusterResource(), k)
			if v1 != v2 || ok1 != ok2 {
				t.Fatalf("cluster config %q: %q, %t; want %q, %t", k, v1, ok1, v2, ok2)
			}
		}
		again, err := encodeImage(img, bc)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
		// Also at a later index (empty entries after the last record).
		if img, _, err = decodeImage(data, lb.img.Version()+5); err != nil || img.Version() != lb.img.Version()+5 {
			t.Fatalf("at a later index: %v", err)
		}
		sameImage(t, img, lb.img)
	}
	check() // empty
	for b := next(lb.img); b != nil; b = next(lb.img) {
		lb.apply(b)
		check()
	}

	// Corruption is detected, never applied.
	data, _ := encodeImage(lb.img, lb.bc)
	for _, bad := range [][]byte{
		{2}, data[:len(data)-1], append(slices.Clone(data), 0),
		func() []byte { d := slices.Clone(data); d[len(d)-3] ^= 1; return d }(),
	} {
		if _, _, err := decodeImage(bad, lb.img.Version()); err == nil {
			t.Fatalf("corrupt snapshot %x accepted", bad)
		}
	}
	if _, _, err := decodeImage(data, 1); err == nil {
		t.Fatal("snapshot with records past its index accepted")
	}
}

// TestSnapshotCatchUp: a follower partitioned while the leader compacts past
// its log catches up by snapshot; then a restart rebuilds from the local
// snapshot plus the log.
func TestSnapshotCatchUp(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 6)
	n := newNetworkCatchUp(t, 6, []uint64{1, 2, 3}, nil, 2)
	n.snapEvery = 8
	n.commit(reg(100))
	l := n.waitLeader()
	lag := n.ids[0]
	if lag == l {
		lag = n.ids[1]
	}
	var rest []uint64
	for _, id := range n.ids {
		if id != lag {
			rest = append(rest, id)
		}
	}
	n.isolate(lag)
	behind := n.members[lag].Applied()
	next := richBodies()
	for b := next(n.members[l].Image()); b != nil; b = next(n.members[l].Image()) {
		n.commit(enc(b), rest...)
	}
	for i := range 20 {
		n.commit(enc(controller.SetConfig{Resource: controller.TopicResource("a"), Key: "n", Value: ptr(string(rune('a' + i)))}), rest...)
	}
	first, _ := n.logs[l].FirstIndex()
	if first <= behind+1 {
		t.Fatalf("leader's log starts at %d; follower needs %d", first, behind+1)
	}
	n.heal()
	n.commit(reg(101))
	if !slices.ContainsFunc(n.sent, func(m raftpb.Message) bool { return m.Type == raftpb.MsgSnap && m.To == lag }) {
		t.Fatal("no snapshot sent")
	}
	if !slices.ContainsFunc(n.applied[lag], func(a Applied) bool { return a.Kind == KindSnapshot }) {
		t.Fatal("lagging member did not restore a snapshot")
	}
	n.checkConverged()
	n.checkAgree()
	if c, _ := n.members[lag].Image().Config(controller.ClusterResource(), "compression"); c != "lz4" {
		t.Fatal("cluster config lost in the snapshot")
	}

	// Restart every member over its log: each rebuilds its image from its
	// latest snapshot, and raft replays the committed entries after it.
	for _, id := range n.ids {
		n.start(id, nil, nil)
	}
	n.commit(reg(102))
	n.checkConverged()
	n.checkAgree()
}

// scenario runs a messy schedule: delays, reordering, drops, a leader
// isolation, snapshots. It returns every member's history.
func scenario(t *testing.T, seed uint64) [][]string {
	cryptotest.SetGlobalRandom(t, seed)
	n := newNetworkCatchUp(t, seed, []uint64{1, 2, 3}, []uint64{4}, 3)
	n.maxDelay, n.dropRate, n.snapEvery = 3, 0.05, 10
	for i := range int32(30) {
		if i == 10 {
			n.isolate(n.waitLeader())
		}
		if i == 20 {
			n.heal()
		}
		if l := n.leaders(); len(l) > 0 {
			_ = n.propose(l[len(l)-1], reg(i)) // may be lost: that is part of the schedule
		}
		n.run(3)
	}
	n.heal()
	n.dropRate = 0
	n.run(50)
	n.checkAgree()
	n.checkConverged()
	var out [][]string
	for _, id := range n.ids {
		out = append(out, history(n.applied[id]))
	}
	return out
}

func TestDeterminism(t *testing.T) {
	a, b := scenario(t, 7), scenario(t, 7)
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Fatal("same seed, different histories")
	}
	if len(a[0]) < 10 {
		t.Fatalf("scenario applied only %d entries", len(a[0]))
	}
}

// TestScenarioSeeds runs the messy schedule under many seeds: no member
// ever applies an entry another applied differently, and all converge.
func TestScenarioSeeds(t *testing.T) {
	for s := uint64(100); s < 150; s++ {
		scenario(t, s)
	}
}
