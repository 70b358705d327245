package controller

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// applyErr applies r at the next index and expects ErrNotApplicable with the
// image left as it was.
func applyErr(t *testing.T, img *Image, r Record) {
	t.Helper()
	next, err := img.Apply(img.Version()+1, r)
	if !errors.Is(err, ErrNotApplicable) || next != nil {
		t.Errorf("apply %v: got %v, %v; want ErrNotApplicable", r, next, err)
	}
}

func TestApplyBrokers(t *testing.T) {
	c := newCluster(t)
	c.apply(NewRecord(RegisterBroker{ID: 1, Incarnation: [16]byte{1}, Rack: "a"}))
	b, ok := c.img.Broker(1)
	if !ok || !b.Fenced || b.Epoch != 1 || b.Rack != "a" || c.img.Version() != 1 {
		t.Fatalf("after register: %+v %v, version %d", b, ok, c.img.Version())
	}
	if len(c.img.LiveBrokers()) != 0 {
		t.Fatal("a new registration must start fenced")
	}
	applyErr(t, c.img, NewRecord(UnfenceBroker{ID: 1, Epoch: 99}))  // stale epoch
	applyErr(t, c.img, NewRecord(UnfenceBroker{ID: 2, Epoch: 1}))   // unknown
	applyErr(t, c.img, NewRecord(FenceBroker{ID: 1, Epoch: 1}))     // already fenced
	applyErr(t, c.img, NewRecord(RegisterBroker{ID: 2, Epoch: 55})) // epoch != index
	c.apply(NewRecord(UnfenceBroker{ID: 1, Epoch: 1}))
	if live := c.img.LiveBrokers(); len(live) != 1 || live[0].ID != 1 {
		t.Fatalf("live %v", live)
	}
	c.apply(NewRecord(FenceBroker{ID: 1, Epoch: 1}))
	if b, _ := c.img.Broker(1); !b.Fenced {
		t.Fatal("not fenced")
	}
	// A new incarnation replaces the registration with a new epoch.
	c.apply(NewRecord(RegisterBroker{ID: 1, Incarnation: [16]byte{2}}))
	if b, _ := c.img.Broker(1); b.Epoch != 4 || b.Incarnation != [16]byte{2} || !b.Fenced {
		t.Fatalf("re-registered: %+v", b)
	}
	c.apply(NewRecord(UnregisterBroker{ID: 1}))
	if len(c.img.Brokers()) != 0 {
		t.Fatal("not unregistered")
	}
	applyErr(t, c.img, NewRecord(UnregisterBroker{ID: 1}))
	applyErr(t, c.img, NewRecord(RegisterBroker{ID: -1}))
}

func TestApplyIndexMustGrow(t *testing.T) {
	c := newCluster(t)
	c.brokers("")
	if _, err := c.img.Apply(c.img.Version(), NewRecord(UnregisterBroker{ID: 1})); err == nil {
		t.Fatal("applied at an old index")
	}
	// Gaps are fine: raft indexes skip entries that are not records.
	next, err := c.img.Apply(c.img.Version()+10, NewRecord(UnregisterBroker{ID: 1}))
	if err != nil || next.Version() != c.img.Version()+10 {
		t.Fatal(err)
	}
}

func TestApplyTopicsAndPartitions(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	id := [16]byte{7}
	c.apply(NewRecord(CreateTopic{Name: "t", ID: id, Configs: map[string]string{"retention.ms": "5"}}))
	applyErr(t, c.img, NewRecord(CreateTopic{Name: "t", ID: [16]byte{8}}))  // name in use
	applyErr(t, c.img, NewRecord(CreateTopic{Name: "u", ID: id}))           // id in use
	applyErr(t, c.img, NewRecord(CreateTopic{Name: "u"}))                   // zero id
	applyErr(t, c.img, NewRecord(CreatePartition{TopicID: [16]byte{9}}))    // unknown topic
	applyErr(t, c.img, NewRecord(CreatePartition{TopicID: id, Partition: 1, // not next
		Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}))
	for _, bad := range []CreatePartition{
		{Replicas: nil, ISR: []int32{1}, Leader: 1},
		{Replicas: []int32{1, 1}, ISR: []int32{1}, Leader: 1},
		{Replicas: []int32{1, 2}, ISR: nil, Leader: 1},
		{Replicas: []int32{1, 2}, ISR: []int32{3}, Leader: 3},
		{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 2},
	} {
		bad.TopicID = id
		applyErr(t, c.img, NewRecord(bad))
	}
	c.apply(
		NewRecord(CreatePartition{TopicID: id, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}),
		NewRecord(CreatePartition{TopicID: id, Partition: 1, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3}, Leader: 2}),
	)
	tp := c.img.Topic("t")
	if tp == nil || c.img.TopicByID(id) != tp || len(tp.Partitions) != 2 {
		t.Fatalf("topic %+v", tp)
	}
	if v, ok := c.img.Config(TopicResource("t"), "retention.ms"); !ok || v != "5" {
		t.Fatalf("config %q %v", v, ok)
	}
	if got := c.img.PartitionsLedBy(2); !reflect.DeepEqual(got, []TopicPartition{{id, 1}}) {
		t.Fatalf("led by 2: %v", got)
	}

	// ISR only: partition epoch bumps, leader epoch does not.
	c.apply(NewRecord(ChangePartition{TopicID: id, Partition: 0, ISR: ptr([]int32{1, 3})}))
	if p := c.part(tp, 0); !slices.Equal(p.ISR, []int32{1, 3}) || p.Leader != 1 || p.LeaderEpoch != 0 || p.PartitionEpoch != 1 {
		t.Fatalf("after ISR change: %+v", p)
	}
	// Leader change: both bump.
	c.apply(NewRecord(ChangePartition{TopicID: id, Partition: 0, Leader: ptr(int32(3))}))
	if p := c.part(tp, 0); p.Leader != 3 || p.LeaderEpoch != 1 || p.PartitionEpoch != 2 {
		t.Fatalf("after leader change: %+v", p)
	}
	// Same leader again: leader epoch stays.
	c.apply(NewRecord(ChangePartition{TopicID: id, Partition: 0, Leader: ptr(int32(3))}))
	if p := c.part(tp, 0); p.LeaderEpoch != 1 || p.PartitionEpoch != 3 {
		t.Fatalf("after no-op leader: %+v", p)
	}
	c.apply(NewRecord(ChangePartition{TopicID: id, Partition: 0, Leader: ptr(int32(-1))}))
	if p := c.part(tp, 0); p.Leader != -1 || p.LeaderEpoch != 2 {
		t.Fatalf("after leader -1: %+v", p)
	}
	applyErr(t, c.img, NewRecord(ChangePartition{TopicID: id, Partition: 0, Leader: ptr(int32(2))})) // not in ISR
	applyErr(t, c.img, NewRecord(ChangePartition{TopicID: id, Partition: 0, ISR: ptr([]int32{})}))
	applyErr(t, c.img, NewRecord(ChangePartition{TopicID: id, Partition: 5}))

	c.apply(NewRecord(DeleteTopic{ID: id}))
	if c.img.Topic("t") != nil || c.img.TopicByID(id) != nil || len(c.img.Topics()) != 0 {
		t.Fatal("not deleted")
	}
	if _, ok := c.img.Config(TopicResource("t"), "retention.ms"); ok {
		t.Fatal("configs survived the topic")
	}
	applyErr(t, c.img, NewRecord(DeleteTopic{ID: id}))
	// The name is free again.
	c.apply(NewRecord(CreateTopic{Name: "t", ID: [16]byte{8}}))
}

func TestApplyConfigs(t *testing.T) {
	c := newCluster(t)
	c.apply(NewRecord(CreateTopic{Name: "1", ID: [16]byte{1}}))
	c.apply(
		NewRecord(SetConfig{Resource: TopicResource("1"), Key: "k", Value: ptr("topic")}),
		NewRecord(SetConfig{Resource: BrokerResource(1), Key: "k", Value: ptr("broker")}),
		NewRecord(SetConfig{Resource: ClusterResource(), Key: "k", Value: ptr("cluster")}),
	)
	for res, want := range map[ConfigResource]string{TopicResource("1"): "topic", BrokerResource(1): "broker", ClusterResource(): "cluster"} {
		if v, ok := c.img.Config(res, "k"); !ok || v != want {
			t.Errorf("%v: %q %v, want %q", res, v, ok, want)
		}
	}
	before := c.img
	c.apply(NewRecord(SetConfig{Resource: BrokerResource(1), Key: "k"}))
	if _, ok := c.img.Config(BrokerResource(1), "k"); ok {
		t.Error("not deleted")
	}
	if v, _ := before.Config(BrokerResource(1), "k"); v != "broker" {
		t.Error("delete changed the old image")
	}
	applyErr(t, c.img, NewRecord(SetConfig{Resource: TopicResource("nope"), Key: "k", Value: ptr("v")}))
	applyErr(t, c.img, NewRecord(SetConfig{Resource: ConfigResource{ResourceBroker, "01"}, Key: "k"}))
	applyErr(t, c.img, NewRecord(SetConfig{Resource: ConfigResource{9, ""}, Key: "k"}))
	applyErr(t, c.img, NewRecord(SetConfig{Resource: ClusterResource(), Key: ""}))
}

// TestApplyGroupConfigs: a group's configs are kept by group id whether or
// not the group exists, a group whose last key is deleted is forgotten, and
// a group id is never "".
func TestApplyGroupConfigs(t *testing.T) {
	c := newCluster(t)
	c.apply(
		NewRecord(SetConfig{Resource: GroupResource("g"), Key: "share.auto.offset.reset", Value: ptr("earliest")}),
		NewRecord(SetConfig{Resource: GroupResource("g"), Key: "share.isolation.level", Value: ptr("read_committed")}),
		NewRecord(SetConfig{Resource: GroupResource("h"), Key: "consumer.session.timeout.ms", Value: ptr("50000")}),
		// Same key, other resources: each keeps its own.
		NewRecord(SetConfig{Resource: ClusterResource(), Key: "share.auto.offset.reset", Value: ptr("latest")}),
	)
	if v, ok := c.img.GroupConfig("g", "share.auto.offset.reset"); !ok || v != "earliest" {
		t.Fatalf("g: %q %v", v, ok)
	}
	if v, ok := c.img.Config(GroupResource("h"), "consumer.session.timeout.ms"); !ok || v != "50000" {
		t.Fatalf("Config(h): %q %v", v, ok)
	}
	if _, ok := c.img.GroupConfig("g", "consumer.session.timeout.ms"); ok {
		t.Fatal("g has h's key")
	}
	if got := c.img.ConfiguredGroups(); !slices.Equal(got, []string{"g", "h"}) {
		t.Fatalf("configured groups %v", got)
	}
	if got := c.img.GroupConfigs("g"); !maps.Equal(got, map[string]string{"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"}) {
		t.Fatalf("g's configs %v", got)
	}
	before := c.img
	c.apply(NewRecord(SetConfig{Resource: GroupResource("h"), Key: "consumer.session.timeout.ms"}))
	if got := c.img.ConfiguredGroups(); !slices.Equal(got, []string{"g"}) || c.img.GroupConfigs("h") != nil {
		t.Fatalf("after deleting h's last key: %v, %v", got, c.img.GroupConfigs("h"))
	}
	if v, _ := before.GroupConfig("h", "consumer.session.timeout.ms"); v != "50000" {
		t.Fatal("the delete changed the old image")
	}
	// Deleting a key nobody set applies and changes nothing.
	c.apply(NewRecord(SetConfig{Resource: GroupResource("nobody"), Key: "k"}))
	if got := c.img.ConfiguredGroups(); !slices.Equal(got, []string{"g"}) {
		t.Fatalf("configured groups %v", got)
	}
	applyErr(t, c.img, NewRecord(SetConfig{Resource: GroupResource(""), Key: "k", Value: ptr("v")}))
	applyErr(t, c.img, NewRecord(SetConfig{Resource: GroupResource("g"), Key: "", Value: ptr("v")}))
}

func TestApplyProducerIDs(t *testing.T) {
	c := newCluster(t)
	c.apply(AllocateProducerIDs(c.img, 1, 1000))
	c.apply(AllocateProducerIDs(c.img, 2, 1000))
	if c.img.NextProducerID() != 2000 {
		t.Fatalf("next %d", c.img.NextProducerID())
	}
	applyErr(t, c.img, NewRecord(ProducerIDs{Broker: 1, First: 0, Count: 1000})) // reused block
	applyErr(t, c.img, NewRecord(ProducerIDs{Broker: 1, First: 2000, Count: 0}))
	applyErr(t, c.img, NewRecord(ProducerIDs{Broker: 1, First: 2000, Count: math.MaxInt64}))
}

// TestApplyImmutable applies every sample kind of change and checks that the
// image it started from reads exactly as before.
func TestApplyImmutable(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	tp := c.create("t", 3, 3)
	c.apply(NewRecord(SetConfig{Resource: TopicResource("t"), Key: "a", Value: ptr("1")}))
	c.apply(NewRecord(SetConfig{Resource: GroupResource("f"), Key: "a", Value: ptr("1")}))
	snap := func(img *Image) string {
		s := ""
		for _, b := range img.Brokers() {
			s += Record{Body: b.RegisterBroker}.String()
			s += map[bool]string{true: "F", false: "U"}[b.Fenced]
		}
		for _, tt := range img.Topics() {
			s += tt.Name
			for _, p := range tt.Partitions {
				s += Record{Body: CreatePartition{Replicas: p.Replicas, ISR: p.ISR, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch}}.String()
			}
			v, _ := img.Config(TopicResource(tt.Name), "a")
			s += v
		}
		for _, g := range img.ConfiguredGroups() {
			s += fmt.Sprint(g, img.GroupConfigs(g))
		}
		return s + fmt.Sprint(img.NextProducerID())
	}
	old := c.img
	want := snap(old)
	for _, r := range []Record{
		NewRecord(RegisterBroker{ID: 4}),
		NewRecord(FenceBroker{ID: 1, Epoch: c.epoch(1)}),
		NewRecord(UnregisterBroker{ID: 2}),
		NewRecord(CreateTopic{Name: "u", ID: [16]byte{0xff}}),
		NewRecord(CreatePartition{TopicID: tp.ID, Partition: 3, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}),
		NewRecord(ChangePartition{TopicID: tp.ID, Partition: 0, ISR: ptr([]int32{tp.Partitions[0].Leader}), Leader: ptr(tp.Partitions[0].Leader)}),
		NewRecord(DeleteTopic{ID: tp.ID}),
		NewRecord(SetConfig{Resource: TopicResource("t"), Key: "a", Value: ptr("2")}),
		NewRecord(SetConfig{Resource: TopicResource("t"), Key: "a"}),
		NewRecord(SetConfig{Resource: GroupResource("g"), Key: "a", Value: ptr("3")}),
		NewRecord(SetConfig{Resource: GroupResource("f"), Key: "a"}),
		NewRecord(ProducerIDs{First: 0, Count: 5}),
	} {
		next, err := old.Apply(old.Version()+1, r)
		if err != nil {
			t.Fatalf("%v: %v", r, err)
		}
		if snap(next) == want {
			t.Errorf("%v changed nothing", r)
		}
		if snap(old) != want || old.NextProducerID() != 0 {
			t.Fatalf("%v modified the receiver", r)
		}
	}
}

// dump renders everything in an image, through its unexported fields, so
// tests can check that an image did not change.
func dump(img *Image) string {
	s := fmt.Sprintf("v%d next%d brokers%+v names%v configs%v groups%v", img.version, img.nextProducerID, img.brokers, img.names, img.brokerConfigs, img.groupConfigs)
	for _, t := range img.Topics() {
		s += fmt.Sprintf(" %+v", *t)
	}
	return s
}

// TestApplyBatch: a topic and its 1000 partitions apply as one entry, at one
// index, and the image it started from is untouched.
func TestApplyBatch(t *testing.T) {
	c := newCluster(t)
	c.brokers("a", "b", "c")
	res := CreateTopics(c.img, []TopicSpec{{Name: "big", Partitions: 1000, RF: 3}}, Defaults{}, c.ids(1))
	if res[0].ErrorCode != 0 || len(res[0].Records) != 1001 {
		t.Fatalf("create: %d %s, %d records", res[0].ErrorCode, res[0].Message, len(res[0].Records))
	}
	old, before := c.img, dump(c.img)
	c.apply(NewBatch(res[0].Records)) // through Encode and Decode
	if c.img.Version() != old.Version()+1 {
		t.Fatalf("version %d after %d", c.img.Version(), old.Version())
	}
	tp := c.img.Topic("big")
	if tp == nil || len(tp.Partitions) != 1000 {
		t.Fatalf("topic %v", tp)
	}
	for p := range int32(1000) {
		want := res[0].Records[1+p].Body.(CreatePartition)
		if got := c.part(tp, p); !slices.Equal(got.Replicas, want.Replicas) || got.Leader != want.Leader {
			t.Fatalf("partition %d: %+v, want %+v", p, got, want)
		}
	}
	if dump(old) != before {
		t.Fatal("the batch modified the image it was applied to")
	}

	// A registration in a batch gets the entry's index as its epoch, and
	// later records in the batch see the earlier ones.
	idx := c.img.Version() + 1
	c.apply(NewBatch([]Record{
		NewRecord(RegisterBroker{ID: 4, Incarnation: [16]byte{4}}),
		NewRecord(UnfenceBroker{ID: 4, Epoch: int64(idx)}),
		NewRecord(SetConfig{Resource: BrokerResource(4), Key: "k", Value: ptr("v")}),
		NewRecord(ChangePartition{TopicID: tp.ID, Partition: 0, ISR: ptr([]int32{tp.Partitions[0].Leader}), Leader: ptr(tp.Partitions[0].Leader)}),
		NewRecord(ChangePartition{TopicID: tp.ID, Partition: 0, Leader: ptr(int32(-1))}),
	}))
	if b, ok := c.img.Broker(4); !ok || b.Epoch != int64(idx) || b.Fenced || c.img.Version() != idx {
		t.Fatalf("broker 4 %+v %t at version %d, want epoch %d", b, ok, c.img.Version(), idx)
	}
	if p := c.part(c.img.Topic("big"), 0); p.Leader != -1 || p.PartitionEpoch != 2 || p.LeaderEpoch != 1 || len(p.ISR) != 1 {
		t.Fatalf("partition 0: %+v", p)
	}
}

// TestApplyBatchFails: when the last record of a batch does not apply,
// nothing does: Apply returns nil and that record's error, and the
// receiver, which every earlier record of the batch changed in a copy, is
// exactly as it was.
func TestApplyBatchFails(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	tp := c.create("t", 3, 3)
	c.apply(
		NewRecord(SetConfig{Resource: TopicResource("t"), Key: "a", Value: ptr("1")}),
		NewRecord(SetConfig{Resource: BrokerResource(1), Key: "b", Value: ptr("1")}),
		AllocateProducerIDs(c.img, 1, 10),
	)
	img, before := c.img, dump(c.img)
	l0 := tp.Partitions[0].Leader
	changes := []Record{ // every kind of change, to every part of the image
		NewRecord(RegisterBroker{ID: 4}),
		NewRecord(FenceBroker{ID: 1, Epoch: c.epoch(1)}),
		NewRecord(UnregisterBroker{ID: 2}),
		NewRecord(CreateTopic{Name: "u", ID: [16]byte{0xff}, Configs: map[string]string{"x": "y"}}),
		NewRecord(CreatePartition{TopicID: tp.ID, Partition: 3, Replicas: []int32{3}, ISR: []int32{3}, Leader: 3}),
		NewRecord(ChangePartition{TopicID: tp.ID, Partition: 0, ISR: ptr([]int32{l0}), Leader: ptr(l0)}),
		NewRecord(SetConfig{Resource: TopicResource("t"), Key: "a", Value: ptr("2")}),
		NewRecord(SetConfig{Resource: TopicResource("t"), Key: "c", Value: ptr("3")}),
		NewRecord(SetConfig{Resource: BrokerResource(1), Key: "b"}),
		NewRecord(SetConfig{Resource: ClusterResource(), Key: "d", Value: ptr("4")}),
		AllocateProducerIDs(img, 2, 10),
		NewRecord(DeleteTopic{ID: tp.ID}),
	}
	// The changes do apply, as a batch.
	ok, err := img.Apply(img.Version()+1, NewBatch(changes))
	if err != nil {
		t.Fatal(err)
	}
	if dump(ok) == before || dump(img) != before {
		t.Fatal("the batch changed nothing, or changed the receiver")
	}
	// Each change first in a failing batch: the first change to a part of
	// the copy is the one that must not write into the receiver's.
	fail := NewRecord(DeleteTopic{ID: [16]byte{0xee}})
	for _, ch := range changes {
		if _, err := img.Apply(img.Version()+1, ch); err != nil {
			t.Fatalf("%v alone: %v", ch, err)
		}
		next, err := img.Apply(img.Version()+1, NewBatch([]Record{ch, fail}))
		if !errors.Is(err, ErrNotApplicable) || next != nil || !strings.Contains(err.Error(), "(batch record 1 of 2)") {
			t.Fatalf("%v then a failure: got %v, %v", ch, next, err)
		}
		if dump(img) != before {
			t.Fatalf("%v then a failure: the batch changed the receiver", ch)
		}
	}
	for _, last := range []Record{
		NewRecord(DeleteTopic{ID: tp.ID}),                                        // deleted earlier in the batch
		NewRecord(CreateTopic{Name: "u", ID: [16]byte{0xfe}}),                    // name taken earlier in the batch
		NewRecord(ProducerIDs{Broker: 1, First: img.NextProducerID(), Count: 1}), // block taken earlier in the batch
		NewRecord(UnfenceBroker{ID: 2, Epoch: c.epoch(2)}),                       // unregistered earlier in the batch
	} {
		b := NewBatch(append(slices.Clone(changes), last))
		next, err := img.Apply(img.Version()+1, b)
		if !errors.Is(err, ErrNotApplicable) || next != nil {
			t.Fatalf("last %v: got %v, %v; want nil, ErrNotApplicable", last, next, err)
		}
		if want := fmt.Sprintf("(batch record %d of %d)", len(changes), len(changes)+1); !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
		if dump(img) != before || img.Version() != c.index {
			t.Fatalf("last %v: the failed batch changed the receiver", last)
		}
	}
	// The same through the harness: the image stays, and later records
	// apply to it.
	if dump(img) != before {
		t.Fatal("receiver changed")
	}
	c.apply(NewRecord(SetConfig{Resource: TopicResource("t"), Key: "a", Value: ptr("3")}))
	if v, _ := c.img.Config(TopicResource("t"), "a"); v != "3" {
		t.Fatal(v)
	}
}

func TestApplyBatchInvalid(t *testing.T) {
	c := newCluster(t)
	c.brokers("")
	fence := NewRecord(FenceBroker{ID: 1, Epoch: c.epoch(1)})
	before := dump(c.img)
	for _, b := range []Batch{
		{},
		{Records: []Record{fence, NewRecord(Batch{Records: []Record{fence}})}},
		{Records: []Record{NewRecord(RegisterBroker{ID: 2}), NewRecord(RegisterBroker{ID: 3})}},
		{Records: []Record{fence, {}}},
	} {
		applyErr(t, c.img, NewRecord(b))
	}
	if dump(c.img) != before {
		t.Fatal("an invalid batch changed the image")
	}
	// The index check covers the whole batch.
	if _, err := c.img.Apply(c.img.Version(), NewRecord(Batch{Records: []Record{fence, fence}})); !errors.Is(err, ErrNotApplicable) {
		t.Fatalf("batch at an old index: %v", err)
	}
}

func TestNewBatch(t *testing.T) {
	a := NewRecord(UnregisterBroker{ID: 1})
	b := NewRecord(UnregisterBroker{ID: 2})
	c := NewRecord(UnregisterBroker{ID: 3})
	if got := NewBatch([]Record{a}); !reflect.DeepEqual(got, a) {
		t.Fatalf("one record: %v", got)
	}
	recs := []Record{a, b}
	got := NewBatch(recs)
	if want := NewRecord(Batch{Records: []Record{a, b}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("two records: %v", got)
	}
	recs[0] = c
	if got.Body.(Batch).Records[0] != a {
		t.Fatal("NewBatch retained its argument")
	}
	// Batches flatten.
	if got := NewBatch([]Record{NewBatch([]Record{a, b}), c}); !reflect.DeepEqual(got, NewRecord(Batch{Records: []Record{a, b, c}})) {
		t.Fatalf("flattened: %v", got)
	}
	if got := NewBatch([]Record{NewRecord(Batch{Records: []Record{a}})}); !reflect.DeepEqual(got, a) {
		t.Fatalf("flattened single: %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("NewBatch(nil) did not panic")
		}
	}()
	NewBatch(nil)
}

func TestApplyACL(t *testing.T) {
	a := ACL{ResourceType: 2, Name: "mf.", PatternType: 4, Principal: "User:a", Host: "*", Operation: 4, Permission: 3}
	var img Image
	apply := func(img *Image, c ACLChange) *Image {
		t.Helper()
		next, err := img.Apply(img.Version()+1, NewRecord(c))
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		return next
	}
	i1 := apply(&img, ACLChange{ACL: a})
	i2 := apply(i1, ACLChange{ACL: a}) // again: no change
	if !i2.HasACL(a) || i2.ACLCount() != 1 || img.ACLCount() != 0 {
		t.Fatalf("after add: %v (old image %v)", i2.ACLs(), img.ACLs())
	}
	i3 := apply(i2, ACLChange{ACL: a, Remove: true})
	if i3.ACLCount() != 0 || !i2.HasACL(a) {
		t.Fatalf("after remove: %v, previous image %v", i3.ACLs(), i2.ACLs())
	}
	bad := a
	bad.PatternType = 2 // MATCH is a filter, never a binding
	if _, err := i3.Apply(i3.Version()+1, NewRecord(ACLChange{ACL: bad})); !errors.Is(err, ErrNotApplicable) {
		t.Fatalf("MATCH binding: %v", err)
	}
	name := "mf.settlement.eur"
	f := ACLFilter{ResourceType: 2, Name: &name, PatternType: 2, Operation: 1, Permission: 1}
	if !f.Matches(a) {
		t.Fatal("MATCH filter misses the prefix")
	}
	f.PatternType = 3
	if f.Matches(a) {
		t.Fatal("LITERAL filter matches a prefix")
	}
}

// A DeleteAcls filter's host selects a binding stored with the same
// address written another way when the broker gives the normal form
// (broker/acl.NormalizeHost; here a stand-in that lower-cases), and only
// the same string without it.
func TestACLFilterHost(t *testing.T) {
	legacy := ACL{ResourceType: 2, Name: "t", PatternType: 3, Principal: "User:a", Host: "2001:DB8::1", Operation: 3, Permission: 2}
	h := "2001:db8::1"
	f := ACLFilter{ResourceType: 1, PatternType: 1, Host: &h, Operation: 1, Permission: 1}
	if f.Matches(legacy) {
		t.Fatal("hosts compared in a normal form without one")
	}
	f.NormalizeHost = strings.ToLower
	if !f.Matches(legacy) {
		t.Fatal("filter host in normal form misses the binding stored in another")
	}
	other := "2001:db8::2"
	f.Host = &other
	if f.Matches(legacy) {
		t.Fatal("another host matches")
	}
}

// A batch creating a topic and its partitions grows them in place (the
// batch's own allocations), yet images before it, and a failed batch,
// stay as they were, and a later batch's changes share nothing with it.
func TestApplyBatchOwnsWhatItCreates(t *testing.T) {
	c := newCluster(t)
	c.brokers("")
	id := [16]byte{7}
	recs := []Record{NewRecord(CreateTopic{Name: "t", ID: id})}
	for p := range int32(1000) {
		recs = append(recs, NewRecord(CreatePartition{TopicID: id, Partition: p, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}))
	}
	before := c.img
	c.apply(NewBatch(recs))
	first := c.img
	if before.Topic("t") != nil || len(first.Topic("t").Partitions) != 1000 {
		t.Fatalf("after the batch: before has %v, after %d partitions", before.Topic("t"), len(first.Topic("t").Partitions))
	}
	// A second batch adds partitions and changes one created by the first.
	c.apply(NewBatch([]Record{
		NewRecord(CreatePartition{TopicID: id, Partition: 1000, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}),
		NewRecord(SetConfig{Resource: ConfigResource{Type: ResourceTopic, Name: "t"}, Key: "retention.ms", Value: ptr("5")}),
		NewRecord(CreatePartition{TopicID: id, Partition: 1001, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}),
	}))
	if n := len(first.Topic("t").Partitions); n != 1000 {
		t.Fatalf("the first batch's image changed: %d partitions", n)
	}
	if n := len(c.img.Topic("t").Partitions); n != 1002 {
		t.Fatalf("after the second batch: %d partitions, want 1002", n)
	}
	// A batch that fails part way leaves its base image unchanged.
	bad := []Record{NewRecord(CreatePartition{TopicID: id, Partition: 1002, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}),
		NewRecord(CreatePartition{TopicID: id, Partition: 7})}
	applyErr(t, c.img, NewBatch(bad))
	if n := len(c.img.Topic("t").Partitions); n != 1002 {
		t.Fatalf("a failed batch changed the image: %d partitions", n)
	}
}
