package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// requestAt sends req to the node at addr only, at version at most max.
func requestAt(t *testing.T, addr string, req kmsg.Request, max int16) (kmsg.Response, error) {
	t.Helper()
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(req.Key(), max)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(vs), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// A broker that is not the active controller forwards its clients' admin
// requests over the CONTROLLER listener, at the highest version both ends
// serve, and answers each client at the version it asked for: an old,
// non-flexible CreateTopics gets an answer it can parse, and a
// DeleteTopics by name (v0-5; v6 names topics another way) deletes the
// topic. Both went wrong before: the answer went back at the forwarded
// version, and the names were lost on the way. A flexible answer carries
// nothing of the controller's offset tag.
func TestForwardOldVersions(t *testing.T) {
	c := startCluster(t, 3)
	var via int32
	eventually(t, 10*time.Second, "an active controller", func() bool { return c.Controller() > 0 })
	for id := int32(1); id <= 3; id++ {
		if id != c.Controller() {
			via = id
			break
		}
	}
	addr := c.Addr(via)

	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "old", 2, 1
	create.Topics = append(create.Topics, rt)
	create.TimeoutMillis = 10000
	resp, err := requestAt(t, addr, create, 4)
	if err != nil {
		t.Fatalf("CreateTopics v4 via node %d: %v", via, err)
	}
	if r := resp.(*kmsg.CreateTopicsResponse); r.Version != 4 || len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics v4 via node %d: %+v", via, r)
	}
	// The answer came once this node's image had the topic.
	if ps, _ := layout(t, addr, "old"); len(ps) != 2 {
		t.Fatalf("node %d after CreateTopics: %s", via, describe(ps))
	}
	// At the latest (flexible) version the answer carries no tag of the
	// controller's: the offset it came with stays with the broker.
	rt.Topic = "new"
	create.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	resp, err = request(t, addr, create)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 || r.UnknownTags.Len() != 0 {
		t.Fatalf("CreateTopics v%d via node %d: %+v", r.Version, via, r)
	}
	if ps, _ := layout(t, addr, "new"); len(ps) != 2 {
		t.Fatalf("node %d after CreateTopics: %s", via, describe(ps))
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"old"}
	del.TimeoutMillis = 10000
	resp, err = requestAt(t, addr, del, 3)
	if err != nil {
		t.Fatalf("DeleteTopics v3 via node %d: %v", via, err)
	}
	if r := resp.(*kmsg.DeleteTopicsResponse); r.Version != 3 || len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 ||
		r.Topics[0].Topic == nil || *r.Topics[0].Topic != "old" {
		t.Fatalf("DeleteTopics v3 via node %d: %+v", via, r)
	}
	for _, a := range c.Addrs() {
		if ps, _ := layout(t, a, "old"); ps != nil {
			t.Fatalf("%s still lists the deleted topic: %s", a, describe(ps))
		}
	}
	if code := createTopic(t, addr, "old", 1, 1); code != 0 {
		t.Fatalf("create again: %v", kerr.ErrorForCode(code))
	}
}
