package controller

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestCreateTopicsErrors(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	c.create("exists", 3, 1)
	c.create("a.b", 1, 1)
	d := Defaults{Partitions: 2, RF: 3, MaxPartitions: 1000,
		ValidateConfig: func(k, _ string) error {
			if k == "bogus" {
				return errors.New("unknown config")
			}
			return nil
		}}
	specs := []TopicSpec{
		{Name: "ok", Partitions: -1, RF: -1},
		{Name: "exists", Partitions: 3, RF: 1}, // same count: still rejected
		{Name: "exists", Partitions: 5, RF: 1}, // twice in the request
		{Name: "other", Partitions: 5, RF: 1},
		{Name: "bad/name", Partitions: 1, RF: 1},
		{Name: "..", Partitions: 1, RF: 1},
		{Name: strings.Repeat("x", 250), Partitions: 1, RF: 1},
		{Name: "a_b", Partitions: 1, RF: 1},
		{Name: "zero", Partitions: 0, RF: 1},
		{Name: "toomany", Partitions: 1001, RF: 1},
		{Name: "rf4", Partitions: 1, RF: 4},
		{Name: "rf0", Partitions: 1, RF: 0},
		{Name: "cfg", Partitions: 1, RF: 1, Configs: map[string]string{"bogus": "1"}},
		{Name: "both", Partitions: 1, RF: -1, Assignment: map[int32][]int32{0: {1}}},
		{Name: "gap", Partitions: -1, RF: -1, Assignment: map[int32][]int32{0: {1}, 2: {2}}},
		{Name: "uneven", Partitions: -1, RF: -1, Assignment: map[int32][]int32{0: {1}, 1: {2, 3}}},
		{Name: "dupreplica", Partitions: -1, RF: -1, Assignment: map[int32][]int32{0: {1, 1}}},
		{Name: "nobroker", Partitions: -1, RF: -1, Assignment: map[int32][]int32{0: {1, 9}}},
		{Name: "manual", Partitions: -1, RF: -1, Assignment: map[int32][]int32{0: {3, 1}, 1: {2, 3}}},
	}
	want := []int16{0, kerr.TopicAlreadyExists.Code, kerr.InvalidRequest.Code, 0,
		kerr.InvalidTopicException.Code, kerr.InvalidTopicException.Code, kerr.InvalidTopicException.Code,
		kerr.InvalidTopicException.Code, kerr.InvalidPartitions.Code, kerr.InvalidPartitions.Code,
		kerr.InvalidReplicationFactor.Code, kerr.InvalidReplicationFactor.Code, kerr.InvalidConfig.Code,
		kerr.InvalidRequest.Code, kerr.InvalidReplicaAssignment.Code, kerr.InvalidReplicaAssignment.Code,
		kerr.InvalidReplicaAssignment.Code, kerr.InvalidReplicaAssignment.Code, 0}
	// "exists" is twice in specs: both occurrences are INVALID_REQUEST.
	want[1] = kerr.InvalidRequest.Code
	res := CreateTopics(c.img, specs, d, c.ids(len(specs)))
	for i, r := range res {
		if r.ErrorCode != want[i] {
			t.Errorf("%s: code %d (%s), want %d", r.Name, r.ErrorCode, r.Message, want[i])
		}
		if (r.ErrorCode == 0) != (len(r.Records) > 0) {
			t.Errorf("%s: code %d with %d records", r.Name, r.ErrorCode, len(r.Records))
		}
		if r.ErrorCode == 0 {
			c.apply(r.Records...)
		}
	}
	if ok := c.img.Topic("ok"); len(ok.Partitions) != 2 || len(ok.Partitions[0].Replicas) != 3 || res[0].RF != 3 {
		t.Errorf("defaults not used: %+v %+v", ok, res[0])
	}
	m := c.img.Topic("manual")
	if !reflect.DeepEqual(m.Partitions[0].Replicas, []int32{3, 1}) || m.Partitions[0].Leader != 3 || m.Partitions[1].Leader != 2 {
		t.Errorf("manual: %+v", m.Partitions)
	}
}

func TestCreateExistingTopicOtherCountRejected(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	c.create("t", 3, 1)
	before := c.img
	res := CreateTopics(c.img, []TopicSpec{{Name: "t", Partitions: 6, RF: 1}}, Defaults{}, c.ids(1))
	if res[0].ErrorCode != kerr.TopicAlreadyExists.Code || len(res[0].Records) != 0 {
		t.Fatalf("%+v", res[0])
	}
	if c.img != before || len(c.img.Topic("t").Partitions) != 3 {
		t.Fatal("changed")
	}
}

func TestCreateRFAboveLiveBrokers(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	c.apply(NewRecord(FenceBroker{ID: 3, Epoch: c.epoch(3)}))
	res := CreateTopics(c.img, []TopicSpec{{Name: "t", Partitions: 1, RF: 3}}, Defaults{}, c.ids(1))
	if res[0].ErrorCode != kerr.InvalidReplicationFactor.Code {
		t.Fatalf("%+v", res[0])
	}
	// With a manual assignment the fenced broker is a replica but not in the ISR.
	res = CreateTopics(c.img, []TopicSpec{{Name: "m", Partitions: -1, RF: -1, Assignment: map[int32][]int32{0: {3, 1}}}}, Defaults{}, c.ids(1))
	c.apply(res[0].Records...)
	if p := c.part(c.img.Topic("m"), 0); p.Leader != 1 || !reflect.DeepEqual(p.ISR, []int32{1}) {
		t.Fatalf("%+v", p)
	}
	res = CreateTopics(c.img, []TopicSpec{{Name: "f", Partitions: -1, RF: -1, Assignment: map[int32][]int32{0: {3}}}}, Defaults{}, c.ids(1))
	if res[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("all-fenced assignment: %+v", res[0])
	}
}

func TestCreateTopicsIDs(t *testing.T) {
	c := newCluster(t)
	c.brokers("")
	c.create("x", 1, 1) // id 1
	// Zero, in use, then fresh; then taken by the first topic, then fresh.
	ids := [][16]byte{{}, c.img.Topic("x").ID, {1}, {1}, {2}}
	res := CreateTopics(c.img, []TopicSpec{{Name: "a", Partitions: 1, RF: 1}, {Name: "b", Partitions: 1, RF: 1}}, Defaults{}, ids)
	if res[0].ID != [16]byte{1} || res[1].ID != [16]byte{2} {
		t.Fatalf("ids %x %x", res[0].ID, res[1].ID)
	}
	// Too few ids: the topics left without one fail, the others stand.
	res = CreateTopics(c.img, []TopicSpec{{Name: "c", Partitions: 1, RF: 1}, {Name: "d", Partitions: 1, RF: 1}}, Defaults{}, [][16]byte{{}, {3}})
	if res[0].ErrorCode != 0 || res[0].ID != [16]byte{3} || res[1].ErrorCode != kerr.UnknownServerError.Code || len(res[1].Records) != 0 {
		t.Fatalf("ids run out: %+v", res)
	}
}

func TestCreatePartitions(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	tp := c.create("t", 3, 2)
	for _, tc := range []struct {
		topic  string
		n      int32
		assign [][]int32
		code   int16
	}{
		{"nope", 5, nil, kerr.UnknownTopicOrPartition.Code},
		{"t", 2, nil, kerr.InvalidPartitions.Code},
		{"t", 3, nil, kerr.InvalidPartitions.Code},
		{"t", 5, [][]int32{{1, 2}}, kerr.InvalidReplicaAssignment.Code},
		{"t", 4, [][]int32{{1}}, kerr.InvalidReplicaAssignment.Code},
	} {
		if _, code, msg := CreatePartitions(c.img, tc.topic, tc.n, tc.assign, Defaults{}); code != tc.code {
			t.Errorf("%+v: code %d (%s)", tc, code, msg)
		}
	}
	recs, code, _ := CreatePartitions(c.img, "t", 6, nil, Defaults{})
	if code != 0 || len(recs) != 3 {
		t.Fatalf("grow: %d %v", code, recs)
	}
	c.apply(recs...)
	recs, _, _ = CreatePartitions(c.img, "t", 7, [][]int32{{3, 2}}, Defaults{})
	c.apply(recs...)
	tp = c.img.Topic("t")
	if len(tp.Partitions) != 7 || !reflect.DeepEqual(tp.Partitions[6].Replicas, []int32{3, 2}) {
		t.Fatalf("%+v", tp.Partitions)
	}
	leaders, _ := counts(func() (a [][]int32) {
		for _, p := range tp.Partitions[:6] {
			a = append(a, p.Replicas)
		}
		return a
	}())
	for b := int32(1); b <= 3; b++ {
		if leaders[b] != 2 {
			t.Errorf("broker %d leads %d of the first 6", b, leaders[b])
		}
	}
	c.apply(NewRecord(FenceBroker{ID: 3, Epoch: c.epoch(3)}), NewRecord(FenceBroker{ID: 2, Epoch: c.epoch(2)}))
	if _, code, _ := CreatePartitions(c.img, "t", 8, nil, Defaults{}); code != kerr.InvalidReplicationFactor.Code {
		t.Errorf("rf 2 with one live broker: code %d", code)
	}
}

func TestDeleteTopics(t *testing.T) {
	c := newCluster(t)
	c.brokers("")
	a, b := c.create("a", 1, 1), c.create("b", 1, 1)
	c.create("c", 1, 1)
	res := DeleteTopics(c.img, []TopicRef{
		{Name: "a"}, {ID: b.ID}, {Name: "nope"}, {ID: [16]byte{0xee}}, {Name: "c", ID: a.ID},
		{Name: "c"}, {Name: "c"},
	})
	want := []int16{0, 0, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code, kerr.InvalidRequest.Code,
		kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}
	for i, r := range res {
		if r.ErrorCode != want[i] {
			t.Errorf("%d %s: code %d (%s), want %d", i, r.Name, r.ErrorCode, r.Message, want[i])
		}
		c.apply(r.Records...)
	}
	if res[1].Name != "b" || c.img.Topic("a") != nil || c.img.Topic("b") != nil || c.img.Topic("c") == nil {
		t.Fatalf("%+v, topics %v", res, c.img.Topics())
	}
}
