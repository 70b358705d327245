package sharefetch

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/sharepart"
)

// Kafka's share session epochs, for both APIs.
func TestSessionEpochs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, nil)
		defer r.stop()
		accept := [3]int64{0, 0, int64(sharepart.AckAccept)}
		topCode := func(what string, got, want int16) {
			t.Helper()
			if got != want {
				t.Fatalf("%s: code %d, want %d", what, got, want)
			}
		}
		topCode("ack epoch 0", r.ack(ackReq("m1", 0, a0, accept)).ErrorCode, kerr.InvalidShareSessionEpoch.Code)
		topCode("ack without session", r.ack(ackReq("m1", 1, a0, accept)).ErrorCode, kerr.ShareSessionNotFound.Code)
		topCode("final ack without session", r.ack(ackReq("m1", -1, a0, accept)).ErrorCode, kerr.ShareSessionNotFound.Code)
		topCode("fetch without session", r.fetch(fetchReq("m1", 3, a0)).ErrorCode, kerr.ShareSessionNotFound.Code)
		topCode("final fetch without session", r.fetch(fetchReq("m1", -1)).ErrorCode, kerr.ShareSessionNotFound.Code)
		topCode("acks opening a session", r.fetch(withAcks(fetchReq("m1", 0, a0), a0, accept)).ErrorCode, kerr.InvalidRequest.Code)

		r.h.replica(topicA, 0).produce(2, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-1:1")
		topCode("fetch at a later epoch", r.fetch(fetchReq("m1", 2)).ErrorCode, kerr.InvalidShareSessionEpoch.Code)
		topCode("fetch at a negative epoch", r.fetch(fetchReq("m1", -2)).ErrorCode, kerr.InvalidShareSessionEpoch.Code)
		// The refused requests changed nothing: epoch 1 is next.
		if resp := r.ack(ackReq("m1", 1, a0, [3]int64{0, 1, 1})); resp.ErrorCode != 0 || ackCodes(resp)[name(a0)] != 0 {
			t.Fatalf("ack at epoch 1: %d %v", resp.ErrorCode, ackCodes(resp))
		}
		topCode("ack replayed", r.ack(ackReq("m1", 1, a0, accept)).ErrorCode, kerr.InvalidShareSessionEpoch.Code)

		// Incremental: a1 added answers even without records (it is
		// new); a0, quiet, is left out.
		req := fetchReq("m1", 2, a1)
		req.MaxWaitMillis = 50
		got := answers(t, r.fetch(req))
		if ks := keys(got); len(ks) != 1 || ks[0] != name(a1) {
			t.Fatalf("incremental answer %v, want only a/1", ks)
		}
		// a0 forgotten: its new records are not fetched.
		r.h.replica(topicA, 0).produce(1, 1000)
		req = fetchReq("m1", 3)
		req.ForgottenTopicsData = []kmsg.ShareFetchRequestForgottenTopicsData{{TopicID: topicA, Partitions: []int32{0}}}
		req.MaxWaitMillis = 50
		if got := answers(t, r.fetch(req)); len(got) != 0 {
			t.Fatalf("after forgetting a/0: %v", got)
		}
		if s := r.m.Stats(); s.Sessions != 1 || s.SessionPartitions != 1 {
			t.Fatalf("stats %+v", s)
		}
		// Opening again replaces the session (epoch 4 is gone).
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "2-2:1")
		topCode("old session's epoch", r.fetch(fetchReq("m1", 4)).ErrorCode, kerr.InvalidShareSessionEpoch.Code)
	})
}

// Closing a session (epoch -1) applies its acknowledgements, then
// releases the member's records for the others.
func TestFinalEpochReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, nil)
		defer r.stop()
		r.h.replica(topicA, 0).produce(5, 1000)
		wantAcquired(t, answers(t, r.fetch(fetchReq("m1", 0, a0))), a0, "0-4:1")
		resp := r.fetch(withAcks(fetchReq("m1", -1), a0, [3]int64{0, 1, int64(sharepart.AckAccept)}))
		got := answers(t, resp)
		if resp.ErrorCode != 0 || got[name(a0)].ackCode != 0 || got[name(a0)].acquired != "" {
			t.Fatalf("final fetch: %d %+v", resp.ErrorCode, got)
		}
		if c := r.fetch(fetchReq("m1", 2)).ErrorCode; c != kerr.ShareSessionNotFound.Code {
			t.Fatalf("closed session answered %d", c)
		}
		wantAcquired(t, answers(t, r.fetch(fetchReq("m2", 0, a0))), a0, "2-4:2")

		// The same by ShareAcknowledge.
		ack := r.ack(ackReq("m2", -1, a0, [3]int64{2, 2, int64(sharepart.AckAccept)}))
		if ack.ErrorCode != 0 || ackCodes(ack)[name(a0)] != 0 {
			t.Fatalf("final ack: %d %v", ack.ErrorCode, ackCodes(ack))
		}
		wantAcquired(t, answers(t, r.fetch(fetchReq("m3", 0, a0))), a0, "3-4:3")
		if s := r.m.Stats(); s.Sessions != 1 {
			t.Fatalf("sessions %d, want 1", s.Sessions)
		}
	})
}

// The end of the connection that opened a session ends it and releases
// the member's records; when its group has no session left here, its
// share-partitions are unloaded.
func TestDisconnectReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePersister()
		r := newRig(t, p, Config{}, nil)
		defer r.stop()
		r.h.replica(topicA, 0).produce(3, 1000)
		ctx, hangUp := context.WithCancel(context.Background())
		cc := &api.Conn{Ctx: ctx}
		resp := call[*kmsg.ShareFetchResponse](t, r.fetchE, cc, fetchReq("m1", 0, a0))
		wantAcquired(t, answers(t, resp), a0, "0-2:1")
		hangUp()
		synctest.Wait()
		if s := r.m.Stats(); s.Sessions != 0 || s.SharePartitions != 0 {
			t.Fatalf("after the disconnect: %+v", s)
		}
		// Durable: available again with their delivery count.
		if b := p.durable(t, keyOf(a0)).Batches(); len(b) != 1 || b[0].State != sharepart.Available || b[0].DeliveryCount != 1 {
			t.Fatalf("durable after release: %+v", b)
		}
		wantAcquired(t, answers(t, r.fetch(fetchReq("m2", 0, a0))), a0, "0-2:2")
	})
}

// At group.share.max.share.sessions, a new session waits MaxWaitMs and is
// refused; a member replacing its own session is not.
func TestSessionLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{MaxSessions: 1}, nil)
		defer r.stop()
		req := fetchReq("m1", 0, a0)
		req.MaxWaitMillis = 10
		if c := r.fetch(req).ErrorCode; c != 0 {
			t.Fatalf("first session: %d", c)
		}
		req = fetchReq("m2", 0, a0)
		req.MaxWaitMillis = 700
		start := time.Now()
		if c := r.fetch(req).ErrorCode; c != kerr.ShareSessionLimitReached.Code {
			t.Fatalf("second session: %d", c)
		}
		if waited := time.Since(start); waited != 700*time.Millisecond {
			t.Fatalf("refused after %v, want 700ms", waited)
		}
		req = fetchReq("m1", 0, a0)
		req.MaxWaitMillis = 10
		if c := r.fetch(req).ErrorCode; c != 0 {
			t.Fatalf("reopening: %d", c)
		}
	})
}

// The rule wants READ on the group; the handlers READ on each topic.
func TestAuthorization(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFakePersister(), Config{}, nil)
		defer r.stop()
		z := &api.Authz{Conn: r.conn(), Az: denyGroup(testGroup)}
		for _, e := range []api.Entry{r.fetchE, r.ackE} {
			var req kmsg.Request = fetchReq("m1", 0, a0)
			if e.Key == 79 {
				req = ackReq("m1", 1, a0)
			}
			deny, _ := api.Authorize(z, &e, req)
			if deny == nil {
				t.Fatalf("key %d: group not denied", e.Key)
			}
			var code int16
			switch d := deny.(type) {
			case *kmsg.ShareFetchResponse:
				code = d.ErrorCode
			case *kmsg.ShareAcknowledgeResponse:
				code = d.ErrorCode
			}
			if code != kerr.GroupAuthorizationFailed.Code {
				t.Fatalf("key %d: denial code %d", e.Key, code)
			}
		}

		r.h.mu.Lock()
		r.h.denied["a"] = true
		r.h.mu.Unlock()
		req := fetchReq("m1", 0, a0, b0)
		req.MaxWaitMillis = 10
		got := answers(t, r.fetch(req))
		if got[name(a0)].code != kerr.TopicAuthorizationFailed.Code || got[name(b0)].code != 0 {
			t.Fatalf("fetch: %+v", got)
		}
		ack := r.ack(ackReq("m1", 1, a0, [3]int64{0, 0, 1}))
		if ackCodes(ack)[name(a0)] != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("ack: %v", ackCodes(ack))
		}
	})
}

// denyGroup is an authorizer that denies everything on group g.
func denyGroup(g string) *acl.Authorizer {
	return acl.New(acl.Config{AllowIfNoACL: true}, []acl.Binding{{ResourceType: acl.ResourceGroup, Name: g,
		Pattern: acl.PatternLiteral, Principal: "User:*", Host: "*", Operation: acl.OpAll, Permission: acl.PermDeny}})
}
