package txncoord

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
)

// offsetsHost is the node as TxnOffsetCommit sees it: an image of topics
// the test edits, and a group coordinator that records the transactional
// commits it is given.
type offsetsHost struct {
	noHost
	topics map[string]*replicamgr.Topic
	got    map[coordinator.TopicPartition]int64 // what TxnCommit was given
}

func (h *offsetsHost) setTopic(name string, id byte, parts int) {
	h.topics[name] = &replicamgr.Topic{Name: name, ID: [16]byte{15: id}, Parts: make([]*replica.Partition, parts)}
}

func (h *offsetsHost) Topic(name string) *replicamgr.Topic { return h.topics[name] }
func (h *offsetsHost) TopicByID(id [16]byte) *replicamgr.Topic {
	for _, t := range h.topics {
		if t.ID == id {
			return t
		}
	}
	return nil
}
func (h *offsetsHost) Offsets() Offsets          { return h }
func (h *offsetsHost) GroupCode(string) int16    { return 0 }
func (h *offsetsHost) PartitionFor(string) int32 { return 0 }
func (h *offsetsHost) ValidateCommit(string, string, *string, int32) error {
	return nil
}
func (h *offsetsHost) TxnCommit(_ string, _ int64, _ int16, offs map[coordinator.TopicPartition]*coordinator.Committed, done func(error)) {
	for tp, c := range offs {
		h.got[tp] = c.Offset
	}
	done(nil)
}
func (h *offsetsHost) TxnCompleted(int32, int64, int64, bool) {}

// TxnOffsetCommit v6 names topics by id (KIP-1319): a known id commits
// under the topic's name and is answered by id, an unknown id is
// UNKNOWN_TOPIC_ID; the rule hands the handler the name it authorized.
func TestTxnOffsetCommitByTopicID(t *testing.T) {
	h := &offsetsHost{topics: map[string]*replicamgr.Topic{}, got: map[coordinator.TopicPartition]int64{}}
	h.setTopic("t", 1, 2)
	h.setTopic("secret", 2, 2)
	r, err := api.NewRegistry(Entries(h)...)
	if err != nil {
		t.Fatal(err)
	}
	e := r.Get(28)
	if e.Client.Max != 6 {
		t.Fatalf("TxnOffsetCommit served up to v%d", e.Client.Max)
	}
	az := acl.New(acl.Config{AllowIfNoACL: true}, []acl.Binding{{ResourceType: acl.ResourceTopic, Name: "secret",
		Pattern: acl.PatternLiteral, Principal: "User:*", Host: "*", Operation: acl.OpAll, Permission: acl.PermDeny}})
	serve := func(version int16, az *acl.Authorizer, between func(), topics ...kmsg.TxnOffsetCommitRequestTopic) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version, req.TransactionalID, req.Group, req.ProducerID, req.Topics = version, "tx", "g", 7, topics
		in := kmsg.NewPtrTxnOffsetCommitRequest() // what the broker decodes: no names at v6
		in.Version = version
		if err := in.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		cc := &api.Conn{Ctx: context.Background(), Principal: "User:alice", ClientHost: "127.0.0.1"}
		deny, fix := api.Authorize(&api.Authz{Conn: cc, Az: az, Key: 28}, e, in)
		out := deny
		if deny == nil {
			if between != nil {
				between()
			}
			e.Handle(cc, in, func(r kmsg.Response) { out = r })
			if fix != nil {
				fix(out)
			}
		}
		resp := kmsg.NewPtrTxnOffsetCommitResponse()
		resp.Version = version
		if err := resp.ReadFrom(out.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		codes := map[string]int16{}
		for _, rt := range resp.Topics {
			name := rt.Topic
			if version >= 6 {
				name = string(rune('0' + rt.TopicID[15]))
			}
			for _, rp := range rt.Partitions {
				codes[name+"/"+string(rune('0'+rp.Partition))] = rp.ErrorCode
			}
		}
		return codes
	}
	topic := func(name string, id byte, offset int64, parts ...int32) kmsg.TxnOffsetCommitRequestTopic {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = name, [16]byte{15: id}
		for _, p := range parts {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, offset+int64(p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	check := func(what string, got, want map[string]int16) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
			return
		}
		for k, v := range want {
			if c, ok := got[k]; !ok || c != v {
				t.Errorf("%s: %v, want %v", what, got, want)
				return
			}
		}
	}

	check("v6, no authorizer", serve(6, nil, nil, topic("", 1, 10, 0, 1), topic("", 9, 10, 0)),
		map[string]int16{"1/0": 0, "1/1": 0, "9/0": kerr.UnknownTopicID.Code})
	if h.got[coordinator.TopicPartition{Topic: "t", Partition: 1}] != 11 {
		t.Fatalf("committed %v, want t/1 at 11", h.got)
	}
	check("v5 by name", serve(5, nil, nil, topic("t", 0, 20, 0), topic("nope", 0, 20, 0)),
		map[string]int16{"t/0": 0, "nope/0": kerr.UnknownTopicOrPartition.Code})
	if h.got[coordinator.TopicPartition{Topic: "t", Partition: 0}] != 20 {
		t.Fatalf("committed %v, want t/0 at 20", h.got)
	}

	clear(h.got)
	check("v6 with ACLs", serve(6, az, nil, topic("", 1, 30, 0), topic("", 2, 30, 0), topic("", 9, 30, 0)),
		map[string]int16{"1/0": 0, "2/0": kerr.TopicAuthorizationFailed.Code, "9/0": kerr.UnknownTopicID.Code})
	if len(h.got) != 1 || h.got[coordinator.TopicPartition{Topic: "t", Partition: 0}] != 30 {
		t.Fatalf("committed %v, want only t/0 at 30", h.got)
	}

	// The ids swap after the rule authorized id 1 as "t": the commit still
	// goes to "t", never to the denied "secret".
	clear(h.got)
	check("v6 across a rename", serve(6, az, func() { h.setTopic("t", 3, 2); h.setTopic("secret", 1, 2) }, topic("", 1, 40, 0)),
		map[string]int16{"1/0": 0})
	if len(h.got) != 1 || h.got[coordinator.TopicPartition{Topic: "t", Partition: 0}] != 40 {
		t.Fatalf("committed %v, want only t/0 at 40", h.got)
	}
}
