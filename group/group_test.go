package group

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{ErrUnknownMember, kerr.UnknownMemberID},
		{ErrIllegalGeneration, kerr.IllegalGeneration},
		{ErrRebalanceInProgress, kerr.RebalanceInProgress},
		{ErrFencedInstance, kerr.FencedInstanceID},
		{ErrGroupDead, kerr.CoordinatorNotAvailable},
		{ErrNonEmptyGroup, kerr.NonEmptyGroup},
		{ErrGroupNotFound, kerr.GroupIDNotFound},
		{ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
		{ErrInconsistentProtocol, kerr.InconsistentGroupProtocol},
		{ErrMemberIDRequired, kerr.MemberIDRequired},
		{ErrGroupMaxSize, kerr.GroupMaxSizeReached},
		{fmt.Errorf("commit for g: %w", ErrIllegalGeneration), kerr.IllegalGeneration},
		{errors.New("something else"), kerr.UnknownServerError},
	} {
		if got := ErrorCode(tc.err); got != tc.want.Code {
			t.Errorf("ErrorCode(%v) = %d, want %d (%s)", tc.err, got, tc.want.Code, tc.want.Message)
		}
		if !strings.HasPrefix(tc.err.Error(), "group: ") && !strings.Contains(tc.err.Error(), "group: ") && tc.want != kerr.UnknownServerError {
			t.Errorf("%q: want the package prefix", tc.err)
		}
	}
	if ErrorCode(nil) != 0 {
		t.Error("ErrorCode(nil) != 0")
	}
}

func TestConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	// The broker builds a literal with some fields: zero ones take defaults.
	g := NewGroup("g", Config{MinSessionTimeoutMs: 6000, MaxSessionTimeoutMs: 1800000, MaxRebalanceAttempts: 10})
	if g.cfg.InitialRebalanceDelayMs != 0 || g.cfg.MaxSize != 0 {
		t.Errorf("zero delay and max size must stay zero: %+v", g.cfg)
	}
	if g := NewGroup("g", Config{}); g.cfg.MinSessionTimeoutMs != 6000 || g.cfg.MaxSessionTimeoutMs != 1800000 || g.cfg.MaxRebalanceAttempts != 10 {
		t.Errorf("zero Config: %+v", g.cfg)
	}
	for _, bad := range []Config{
		{MinSessionTimeoutMs: 10, MaxSessionTimeoutMs: 5},
		{MinSessionTimeoutMs: -1},
		{InitialRebalanceDelayMs: -1},
		{MaxRebalanceAttempts: -2},
		{MaxSize: -1},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v: want an error", bad)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewGroup(%+v) did not panic", bad)
				}
			}()
			NewGroup("g", bad)
		}()
	}
}

func join(g *Group, now int64, v int16, memberID string, meta JoinMeta, tok string, protos ...kmsg.JoinGroupRequestProtocol) []Reply {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = v
	req.Group = g.ID()
	req.MemberID = memberID
	req.SessionTimeoutMillis = 10000
	req.RebalanceTimeoutMillis = 20000
	req.ProtocolType = "consumer"
	req.Protocols = protos
	return g.Join(now, req, meta, tok)
}

func TestAccessors(t *testing.T) {
	g := NewGroup("orders", DefaultConfig())
	if g.ID() != "orders" || g.State() != "Empty" || g.Generation() != 0 || g.Leader() != "" || g.NumMembers() != 0 || g.Protocol() != "" || g.ProtocolType() != "" {
		t.Fatalf("new group: %s", g.dump())
	}
	out := join(g, 0, 3, "", JoinMeta{ClientID: "cli", ClientHost: "/1.2.3.4"}, "t1", kmsg.JoinGroupRequestProtocol{Name: "range", Metadata: []byte("m")})
	if len(out) != 0 || g.State() != "PreparingRebalance" || g.NumMembers() != 1 || g.Leader() != "cli-1" || g.ProtocolType() != "consumer" {
		t.Fatalf("after join: %v %s", out, g.dump())
	}
	out = g.Tick(3000)
	if len(out) != 1 || out[0].Token != "t1" || g.Generation() != 1 || g.Protocol() != "range" || g.State() != "CompletingRebalance" {
		t.Fatalf("after tick: %v %s", out, g.dump())
	}
	if r := out[0].Resp.(*kmsg.JoinGroupResponse); r.Version != 3 || r.MemberID != "cli-1" {
		t.Fatalf("join response %+v", r)
	}
}

// The group copies what it keeps: a broker may decode requests from a buffer
// it reuses.
func TestRequestBuffersNotRetained(t *testing.T) {
	g := NewGroup("g", DefaultConfig())
	md := []byte("metadata")
	join(g, 0, 3, "", JoinMeta{ClientID: "a"}, "t1", kmsg.JoinGroupRequestProtocol{Name: "range", Metadata: md})
	out := g.Tick(3000)
	copy(md, "XXXXXXXX")
	if got := out[0].Resp.(*kmsg.JoinGroupResponse).Members[0].ProtocolMetadata; string(got) != "metadata" {
		t.Fatalf("metadata aliased the request: %q", got)
	}
	asg := []byte("assignment")
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.MemberID, sreq.Generation = "a-1", 1
	sreq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "a-1", MemberAssignment: asg}}
	g.Sync(3001, sreq, "s1")
	copy(asg, "XXXXXXXXXX")
	if got := g.Describe().Members[0].MemberAssignment; string(got) != "assignment" {
		t.Fatalf("assignment aliased the request: %q", got)
	}
}

// JoinGroup v0 has no rebalance timeout: the session timeout serves.
func TestJoinV0RebalanceTimeout(t *testing.T) {
	g := NewGroup("g", Config{InitialRebalanceDelayMs: 0})
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 0
	req.SessionTimeoutMillis = 7000
	req.RebalanceTimeoutMillis = 99999 // not on the wire at v0
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if out := g.Join(0, req, JoinMeta{ClientID: "a"}, "t"); len(out) != 1 {
		t.Fatalf("want an immediate response, got %v", out)
	}
	if g.syncDeadline != 7000 {
		t.Fatalf("sync deadline %d, want 7000 (the session timeout)", g.syncDeadline)
	}
}

func TestMemberIDNonce(t *testing.T) {
	g := NewGroup("g", Config{MemberIDNonce: "18c2f"})
	out := join(g, 0, 4, "", JoinMeta{ClientID: "consumer-1"}, "t", kmsg.JoinGroupRequestProtocol{Name: "range"})
	if id := out[0].Resp.(*kmsg.JoinGroupResponse).MemberID; id != "consumer-1-18c2f-1" {
		t.Fatalf("member id %q", id)
	}
}
