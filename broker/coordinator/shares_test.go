package coordinator

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group/share"
)

func shareHeartbeat(t *testing.T, c *Coordinator, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	var resp *kmsg.ShareGroupHeartbeatResponse
	exists, wait, err := c.Share(req.GroupID, req.MemberEpoch == 0, func(g *share.Group, img *share.Image, now int64) []share.Record {
		var recs []share.Record
		resp, recs = g.Heartbeat(now, img, req)
		return recs
	})
	if err != nil || !exists {
		t.Fatalf("share heartbeat of %s: exists %v, %v", req.MemberID, exists, err)
	}
	if wait != nil {
		if err := wait(); err != nil {
			t.Fatalf("records of %s not committed: %v", req.MemberID, err)
		}
	}
	return resp
}

func joinShare(group, member string) *kmsg.ShareGroupHeartbeatRequest {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID, req.MemberEpoch = group, member, 0
	req.SubscribedTopicNames = []string{"t"}
	return req
}

// A share group's members and their (shared) assignments come back when
// another coordinator loads the log; a share group never takes another
// type's id, nor the other way round; deleting it needs it empty.
func TestShareGroupReloadAndTypes(t *testing.T) {
	dir := t.TempDir()
	p := leader(t, dir)
	c := newTest(t, p)
	c.host.(*testHost).setTopics(topicT)
	for _, m := range []string{"s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"} {
		if r := shareHeartbeat(t, c, joinShare("sg", m)); r.ErrorCode != 0 {
			t.Fatalf("join %s: %d %v", m, r.ErrorCode, r.ErrorMessage)
		}
	}
	var before kmsg.ShareGroupDescribeResponseGroup
	c.Share("sg", false, func(g *share.Group, img *share.Image, _ int64) []share.Record { before = g.Describe(img); return nil })
	if len(before.Members) != 8 {
		t.Fatalf("before: %+v", before)
	}

	heartbeat848(t, c, join848("cg", "m"))
	if _, _, err := c.Share("cg", true, func(*share.Group, *share.Image, int64) []share.Record { return nil }); !errors.Is(err, ErrOtherGroupType) {
		t.Fatalf("share member into a consumer group: %v", err)
	}
	if _, _, err := c.Consumer("sg", true, nil, nil); !errors.Is(err, ErrOtherGroupType) {
		t.Fatalf("consumer member into a share group: %v", err)
	}
	if _, _, err := c.DeleteNextGen("sg"); err == nil {
		t.Fatal("deleted a share group with members")
	}
	if c.GroupType("sg") != ShareGroupType || c.GroupType("cg") != ConsumerGroupType || c.GroupType("none") != "" {
		t.Fatalf("types: %q %q %q", c.GroupType("sg"), c.GroupType("cg"), c.GroupType("none"))
	}

	p.Log().Close()
	c2 := newTest(t, leader(t, dir))
	c2.host.(*testHost).setTopics(topicT)
	var after kmsg.ShareGroupDescribeResponseGroup
	if ok, _, _ := c2.Share("sg", false, func(g *share.Group, img *share.Image, _ int64) []share.Record { after = g.Describe(img); return nil }); !ok {
		t.Fatal("the share group did not come back")
	}
	if after.GroupEpoch != before.GroupEpoch || len(after.Members) != 8 {
		t.Fatalf("after the reload: epoch %d members %d; before %d %d", after.GroupEpoch, len(after.Members), before.GroupEpoch, len(before.Members))
	}
	for i := range before.Members {
		if before.Members[i].MemberID != after.Members[i].MemberID || before.Members[i].MemberEpoch != after.Members[i].MemberEpoch {
			t.Fatalf("member %d: %+v / %+v", i, before.Members[i], after.Members[i])
		}
	}
	types := map[string]string{}
	for _, g := range c2.ListGroups() {
		types[g.ID] = g.Type
	}
	if types["sg"] != ShareGroupType || types["cg"] != ConsumerGroupType {
		t.Fatalf("ListGroups types: %v", types)
	}
}
