package quorum

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"testing/cryptotest"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/fjordlog/fjord/controller"
)

// bigTopic returns a CreateTopic and its partitions partitions, as records.
func bigTopic(name string, id [16]byte, partitions int32) []controller.Record {
	recs := []controller.Record{controller.NewRecord(controller.CreateTopic{Name: name, ID: id})}
	for p := range partitions {
		recs = append(recs, controller.NewRecord(controller.CreatePartition{
			TopicID: id, Partition: p, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1 + p%3,
		}))
	}
	return recs
}

// snapshotRecords decodes snapshot data into its records.
func snapshotRecords(t testing.TB, data []byte) []controller.Record {
	t.Helper()
	var out []controller.Record
	if len(data) == 0 {
		return nil
	}
	d := data[1:]
	uv := func() uint64 {
		x, n := binary.Uvarint(d)
		if n <= 0 {
			t.Fatal("bad snapshot")
		}
		d = d[n:]
		return x
	}
	for range uv() {
		uv()
		n := uv()
		r, err := controller.Decode(d[:n])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
		d = d[n:]
	}
	return out
}

func hasBatch(recs []controller.Record) bool {
	return slices.ContainsFunc(recs, func(r controller.Record) bool { return r.Type() == controller.TypeBatch })
}

// TestBatchEntry: one entry carrying a topic and its 1000 partitions (and a
// broker config, which the member shadows for snapshots) applies on every
// member, voters and learner, at one index. A batch whose last record does
// not apply is skipped whole, alike on every member.
func TestBatchEntry(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 11)
	n := newNetwork(t, 11, []uint64{1, 2, 3}, []uint64{4})
	n.commit(reg(1))
	recs := append(bigTopic("big", tid(1), 1000),
		controller.NewRecord(controller.SetConfig{Resource: controller.BrokerResource(1), Key: "k", Value: ptr("v")}))
	data := controller.Encode(controller.NewBatch(recs))
	idx := n.commit(data) // fails unless every member applied it without error
	for _, id := range n.ids {
		m := n.members[id]
		tp := m.Image().Topic("big")
		if tp == nil || len(tp.Partitions) != 1000 || m.Image().Version() < idx {
			t.Fatalf("member %d: topic %v at version %d", id, tp != nil, m.Image().Version())
		}
		if v, ok := m.Image().Config(controller.BrokerResource(1), "k"); !ok || v != "v" || m.bc["1"]["k"] != "v" {
			t.Fatalf("member %d: broker config %q %t, shadow %v", id, v, ok, m.bc)
		}
		var a Applied
		for _, x := range n.applied[id] {
			if x.Index == idx {
				a = x
			}
		}
		if b, ok := a.Record.Body.(controller.Batch); !ok || len(b.Records) != 1002 || a.Err != nil {
			t.Fatalf("member %d: applied %v at %d", id, a.Kind, idx)
		}
	}
	n.checkConverged()
	n.checkAgree()

	// The last record fails (the name is taken): nothing of the batch
	// applies, not the config, not its shadow; only the version moves.
	bad := controller.Encode(controller.NewBatch([]controller.Record{
		controller.NewRecord(controller.SetConfig{Resource: controller.BrokerResource(1), Key: "k2", Value: ptr("v")}),
		controller.NewRecord(controller.CreateTopic{Name: "small", ID: tid(2)}),
		controller.NewRecord(controller.CreateTopic{Name: "big", ID: tid(3)}),
	}))
	if err := n.propose(n.waitLeader(), bad); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		n.run(1)
		if !slices.ContainsFunc(n.ids, func(id uint64) bool { return n.appliedAt(id, bad) == 0 }) {
			break
		}
	}
	badIdx := n.appliedAt(n.ids[0], bad)
	for _, id := range n.ids {
		m := n.members[id]
		i := slices.IndexFunc(n.applied[id], func(a Applied) bool { return a.Index == badIdx && bytes.Equal(a.Data, bad) })
		if badIdx == 0 || i < 0 || !errors.Is(n.applied[id][i].Err, controller.ErrNotApplicable) {
			t.Fatalf("member %d: the failing batch was not skipped with an error", id)
		}
		if m.Image().Version() < badIdx || m.Image().Topic("small") != nil {
			t.Fatalf("member %d: version %d, small %v", id, m.Image().Version(), m.Image().Topic("small"))
		}
		if _, ok := m.Image().Config(controller.BrokerResource(1), "k2"); ok || m.bc["1"]["k2"] != "" {
			t.Fatalf("member %d: a config of the failed batch applied", id)
		}
	}
	n.commit(reg(2))
	n.checkConverged()
	n.checkAgree()

	// The reserved key cannot hide in a batch.
	noopRec := controller.NewRecord(controller.SetConfig{Resource: controller.ClusterResource(), Key: noopKey})
	if err := n.propose(n.waitLeader(), controller.Encode(controller.NewBatch([]controller.Record{controller.NewRecord(controller.UnregisterBroker{ID: 2}), noopRec}))); err == nil {
		t.Fatal("a batch with the reserved key was accepted")
	}
}

// TestSnapshotBatch: after batches, an image can hold more records than the
// log has indexes; the snapshot then puts them in one Batch, and rebuilds
// the same image (and shadow configs). A log without batches never gets a
// Batch in its snapshots.
func TestSnapshotBatch(t *testing.T) {
	check := func(lb *logBuilder, wantBatch bool) {
		t.Helper()
		data, err := encodeImage(lb.img, lb.bc)
		if err != nil {
			t.Fatal(err)
		}
		if got := hasBatch(snapshotRecords(t, data)); got != wantBatch {
			t.Fatalf("snapshot at %d has a batch: %t, want %t", lb.img.Version(), got, wantBatch)
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
				if got := bc[res][k]; got != v {
					t.Fatalf("shadow config %q/%q = %q, want %q", res, k, got, v)
				}
				if got, ok := img.Config(controller.ConfigResource{Type: controller.ResourceBroker, Name: res}, k); !ok || got != v {
					t.Fatalf("config %q/%q = %q, want %q", res, k, got, v)
				}
			}
		}
		if again, err := encodeImage(img, bc); err != nil || !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
	}
	batch := func(recs ...controller.Record) controller.Body { return controller.NewBatch(recs).Body }

	// A registration at the snapshot index goes first in the batch.
	lb := &logBuilder{t: t, img: new(controller.Image), bc: brokerConfigs{}}
	lb.apply(batch(append([]controller.Record{controller.NewRecord(controller.RegisterBroker{ID: 1}),
		controller.NewRecord(controller.UnfenceBroker{ID: 1, Epoch: 1})}, bigTopic("a", tid(1), 10)...)...))
	check(lb, true)

	// Registrations before the snapshot index stay at their epochs; the
	// rest, unfences included, go in the batch.
	lb.apply(controller.RegisterBroker{ID: 2})
	lb.apply(batch(append(bigTopic("b", tid(2), 20),
		controller.NewRecord(controller.SetConfig{Resource: controller.BrokerResource(2), Key: "k", Value: ptr("v")}),
		controller.NewRecord(controller.SetConfig{Resource: controller.ClusterResource(), Key: "c", Value: ptr("w")}),
		controller.NewRecord(controller.ProducerIDs{Broker: 1, First: 0, Count: 10}),
		controller.NewRecord(controller.UnfenceBroker{ID: 2, Epoch: 2}))...))
	check(lb, true)
	lb.apply(controller.RegisterBroker{ID: 3})
	check(lb, true)

	// Once the log has as many indexes as the image has records, the
	// snapshot is plain records again.
	for lb.img.Version() < 40 {
		lb.apply(controller.SetConfig{Resource: controller.TopicResource("a"), Key: "n", Value: ptr("x")})
	}
	check(lb, false)

	// A log without batches never needs one.
	lb = &logBuilder{t: t, img: new(controller.Image), bc: brokerConfigs{}}
	next := richBodies()
	for b := next(lb.img); b != nil; b = next(lb.img) {
		lb.apply(b)
		check(lb, false)
	}
}

// TestSnapshotCatchUpBatch: a follower that missed batch entries catches up
// by a snapshot that needs a Batch, and every member restarts from its own.
func TestSnapshotCatchUpBatch(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 12)
	n := newNetworkCatchUp(t, 12, []uint64{1, 2, 3}, []uint64{4}, 1)
	n.snapEvery = 3
	n.commit(reg(1))
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
	for i := range byte(4) {
		n.commit(controller.Encode(controller.NewBatch(append(bigTopic(string('a'+rune(i)), tid(i+1), 100),
			controller.NewRecord(controller.SetConfig{Resource: controller.BrokerResource(1), Key: string('a' + rune(i)), Value: ptr("v")})))), rest...)
	}
	n.heal()
	n.commit(reg(2))
	if !slices.ContainsFunc(n.sent, func(m raftpb.Message) bool {
		return m.Type == raftpb.MsgSnap && m.To == lag && hasBatch(snapshotRecords(t, m.Snapshot.Data))
	}) {
		t.Fatal("no snapshot with a batch sent to the lagging member")
	}
	n.checkConverged()
	n.checkAgree()
	for _, id := range n.ids {
		if len(n.members[id].Image().Topics()) != 4 || n.members[id].bc["1"]["d"] != "v" {
			t.Fatalf("member %d: %d topics, shadow %v", id, len(n.members[id].Image().Topics()), n.members[id].bc)
		}
	}
	for _, id := range n.ids {
		n.start(id, nil, nil)
	}
	n.commit(reg(3))
	n.checkConverged()
	n.checkAgree()
}
