package compattests

// TestFaultGroup848CoordinatorKill: a KIP-848 consumer group rides out the
// SIGKILL of its group coordinator, stable and in the middle of a
// rebalance, and of a data partition leader.
//
// Three fjord processes (the fault cluster: RF 3 for data and
// __consumer_offsets, min.insync.replicas=2, members heartbeating every
// 250 ms with a 6 s session), a 12-partition topic, the fault workload's
// idempotent acks=all producer throughout, and four franz-go KIP-848
// consumers in one group, three partitions each. Then, per round:
//
//  1. the group's coordinator (FindCoordinator) is killed with SIGKILL;
//     while it is down, another node must load the group from
//     __consumer_offsets and describe it with the same members, member
//     epochs and assignments as before, and still so a full session
//     later (the members heartbeat it); the killed node then restarts;
//  2. the node leading the most data partitions, other than the
//     coordinator, is killed with SIGKILL for 4 s (past the 3 s broker
//     session timeout, so its leaderships move) and restarted.
//
// Then a fifth member joins, and the coordinator is killed once one of
// the others has revoked what it gives up and reached the new group
// epoch, with the other revocations under way: the next coordinator must
// finish the rebalance from what was committed (five members, 2-3
// partitions each), the old members keeping their ids and epochs.
//
// FJORD_FAULTS unset or "short": one round, about 30 s. "full": two
// rounds, and after the rebalance a 6 s SIGSTOP of a data leader other
// than the coordinator, about 55 s. Between faults, the data topic and
// __consumer_offsets get back their full ISRs.
//
// What must hold, and why:
//
//   - Durable reload. The coordinator answers a heartbeat only once its
//     records are committed on the offsets partition, so no member ever
//     acts on an epoch or assignment a failover can take back, and the
//     next coordinator rebuilds the group as the members know it and
//     starts every member's session at its load (Kafka's onLoaded). The
//     members reach it within a few seconds (a SIGKILLed node's sockets
//     are reset; franz-go retries and finds the new coordinator, see
//     member848Opts for the one case where it needs help), well inside
//     the 6 s session, so none is fenced: ConsumerGroupDescribe
//     after the failover lists the same member ids with member epochs not
//     below (in fact equal to) the ones before, the same assignments and
//     the same group epoch (nothing about the members or the topics
//     changed, so nothing may rebalance). On the client side no member
//     loses its partitions (OnPartitionsLost) or changes its member id,
//     and every member keeps exactly the partitions it had. A coordinator
//     that had lost the group would answer UNKNOWN_MEMBER_ID and franz-go
//     would rejoin under fresh ids; one that had lost the newest epochs
//     would answer FENCED_MEMBER_EPOCH and franz-go would abandon its
//     partitions and rejoin at epoch 0: both fail here.
//   - No partition owned by two members at once. KIP-848 gives a
//     partition to a new owner only once the old owner reported it
//     revoked, so among members in good standing an overlap never
//     happens. KIP-848 does allow one kind: a zombie. A member cut off
//     from the coordinator keeps its partitions (neither the KIP nor
//     franz-go has a client-side session timer; the Java consumer leaves
//     on its poll timer, not for want of a coordinator), while the coordinator fences it once
//     its session (or rebalance timeout) runs out and hands its
//     partitions to others at once; the zombie drops them
//     (OnPartitionsLost) only when its next heartbeat is refused. Its
//     offset commits are refused too (stale member epoch), so the
//     overlap costs duplicates, not losses. A zombie can only come from a
//     member fenced while cut off, which the durable-reload check already
//     forbids in this scenario: so any overlap fails the test, and the
//     message says whether a fenced member (a zombie) explains it or
//     whether it breaks the revoke-before-assign rule. (Freezing the
//     coordinator instead of killing it would legitimately make zombies:
//     the members' heartbeats hang on its open sockets for franz-go's
//     10 s request timeout while the new coordinator's 6 s sessions run;
//     so the SIGSTOP here spares the coordinator.)
//   - Data: every acknowledged record is in the final log once, in order
//     (the fault checker on a full read-back); every acknowledged record
//     was consumed by the group at least once; the committed offsets
//     reach the end offsets.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFaultGroup848CoordinatorKill(t *testing.T) {
	const (
		topic, group = "fault848", "fault848-group"
		partitions   = 12
		nMembers     = 4
		rate         = 400 // records per second
		dataDown     = 4 * time.Second
		minCoordDown = 4 * time.Second
		frozen       = 6 * time.Second
	)
	rounds, freeze := 1, false
	if faultMode(t) == "full" {
		rounds, freeze = 2, true
	}
	begin := time.Now()
	fc := startFaultCluster(t, 3, groupBroker848Overrides...)
	fc.createFaultTopic(t, topic, partitions)
	logDir := t.TempDir()
	if keep := os.Getenv("FJORD_FAULT_LOGS"); keep != "" {
		// Runs before the cluster's own clean-up (LIFO): the nodes are
		// still up and their logs still there.
		t.Cleanup(func() { keepFaultLogs(t, fc, logDir, filepath.Join(keep, t.Name()+"-"+time.Now().Format("150405"))) })
	}
	prod := startFaultProducer(t, fc, topic, rate, logDir)
	adm := kadm.NewClient(newClient(t, fc.Addr(1), kgo.SeedBrokers(fc.AllAddrs()...)))
	logf := func(format string, args ...any) {
		t.Logf("t+%5.1fs %s", time.Since(begin).Seconds(), fmt.Sprintf(format, args...))
	}

	log := newConsumedLog()
	var members []*franzMember
	for i := range nMembers {
		m := startFranzMember(t, fmt.Sprintf("m%d", i), fc.Addr(1), group, topic, log, nil, member848Opts(fc)...)
		members = append(members, m)
	}
	closed := false
	closeAll := func() {
		if closed {
			return
		}
		closed = true
		for _, m := range members {
			m.Close(10 * time.Second)
		}
	}
	t.Cleanup(closeAll)
	watch := watchOverlap(members...)
	histories := func() {
		for _, m := range members {
			t.Log(m.History())
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			histories()
		}
	})

	d := waitUntil(t, 45*time.Second, "4 members own 3 partitions each", func() (bool, string) {
		return ownership(partitions, partitions/nMembers, partitions/nMembers, members...)
	})
	logf("group settled in %v", d.Round(time.Millisecond))
	waitUntil(t, 20*time.Second, "every member processes records and the group commits", func() (bool, string) {
		counts := log.memberCounts()
		for _, m := range members {
			if counts[m.name] == 0 {
				return false, fmt.Sprintf("processed per member %v", counts)
			}
		}
		com := committedOffsets(t, adm, group, topic)
		return len(com) > 0, fmt.Sprintf("processed per member %v, committed %s", counts, fmtOffsets(com))
	})

	coord := awaitCoordinator(t, fc, group, 0)
	view := awaitGroup848(t, fc, group, coord, nMembers, 20*time.Second)
	checkClientsMatch(t, view, members)
	logf("before the faults: %s", view)

	for round := range rounds {
		// 1. The coordinator.
		before, clients := view, snapshotClients(members)
		old := before.coordinator
		fc.Kill(old)
		killed := time.Now()
		logf("round %d: SIGKILL node %d, the coordinator of %s; %d acknowledged so far", round+1, old, group, prod.Acked())
		coord = awaitCoordinator(t, fc, group, old)
		after := awaitGroup848(t, fc, group, coord, nMembers, 30*time.Second)
		logf("round %d: node %d coordinates %s %v after the kill: %s", round+1, coord, group, time.Since(killed).Round(time.Millisecond), after)
		// Members must heartbeat the new coordinator at their epochs:
		// a full session after its load, they are all still there.
		time.Sleep(groupSessionTimeout)
		after = awaitGroup848(t, fc, group, coord, nMembers, 10*time.Second)
		checkFailover(t, fmt.Sprintf("round %d: node %d after node %d's SIGKILL", round+1, coord, old), before, after, clients, members)
		time.Sleep(time.Until(killed.Add(minCoordDown)))
		st := time.Now()
		fc.Restart(old)
		logf("round %d: node %d restarted and serving after %v", round+1, old, time.Since(st).Round(time.Millisecond))
		awaitHealed(t, fc, topic)

		// 2. A data leader, not the coordinator.
		victim, led := dataLeaderBesides(t, fc, topic, coord)
		before, clients = after, snapshotClients(members)
		fc.Kill(victim)
		logf("round %d: SIGKILL node %d, leader of %d of %d partitions of %s (not the coordinator, node %d); %d acknowledged so far",
			round+1, victim, led, partitions, topic, coord, prod.Acked())
		time.Sleep(dataDown)
		st = time.Now()
		fc.Restart(victim)
		logf("round %d: node %d restarted and serving after %v", round+1, victim, time.Since(st).Round(time.Millisecond))
		awaitHealed(t, fc, topic)
		coord = awaitCoordinator(t, fc, group, 0)
		view = awaitGroup848(t, fc, group, coord, nMembers, 20*time.Second)
		checkFailover(t, fmt.Sprintf("round %d: after node %d's SIGKILL (a data leader)", round+1, victim), before, view, clients, members)
	}

	// 3. The coordinator again, in the middle of a rebalance: a fifth
	// member joins, and the coordinator dies once one of the others has
	// revoked what it must give up and reached the new epoch, while the
	// others' revocations are under way.
	{
		before, clients := view, snapshotClients(members)
		old := coord
		m := startFranzMember(t, fmt.Sprintf("m%d", len(members)), fc.Addr(1), group, topic, log, nil, member848Opts(fc)...)
		members = append(members, m)
		watch.add(m)
		var at group848View
		waitUntil(t, 20*time.Second, "a member reaches the group epoch the join opened", func() (bool, string) {
			v, err := describe848At(fc, old, group)
			if err != nil {
				return false, err.Error()
			}
			at = v
			for id, mv := range v.members {
				if _, was := before.members[id]; was && mv.epoch > before.epoch {
					return true, ""
				}
			}
			return false, v.String()
		})
		fc.Kill(old)
		killed := time.Now()
		logf("SIGKILL node %d, the coordinator, in a rebalance: %s", old, at)
		coord = awaitCoordinator(t, fc, group, old)
		view = awaitGroup848(t, fc, group, coord, len(members), 45*time.Second)
		d := waitUntil(t, 30*time.Second, "5 members own 2-3 partitions each", func() (bool, string) {
			return ownership(partitions, partitions/len(members), (partitions+len(members)-1)/len(members), members...)
		})
		logf("node %d coordinates %s, Stable %v after the kill (clients settled %v later): %s", coord, group,
			time.Since(killed).Round(time.Millisecond), d.Round(time.Millisecond), view)
		checkMembersKept(t, fmt.Sprintf("node %d after node %d's SIGKILL in a rebalance", coord, old), before, view, clients, members)
		time.Sleep(time.Until(killed.Add(minCoordDown)))
		st := time.Now()
		fc.Restart(old)
		logf("node %d restarted and serving after %v", old, time.Since(st).Round(time.Millisecond))
		awaitHealed(t, fc, topic)
		coord = awaitCoordinator(t, fc, group, 0)
		view = awaitGroup848(t, fc, group, coord, len(members), 20*time.Second)
		checkClientsMatch(t, view, members)
	}

	if freeze {
		victim, led := dataLeaderBesides(t, fc, topic, coord)
		before, clients := view, snapshotClients(members)
		fc.Freeze(t, victim)
		logf("SIGSTOP node %d, leader of %d of %d partitions (not the coordinator, node %d), for %v", victim, led, partitions, coord, frozen)
		time.Sleep(frozen)
		fc.Thaw(t, victim)
		logf("SIGCONT node %d", victim)
		awaitHealed(t, fc, topic)
		coord = awaitCoordinator(t, fc, group, 0)
		view = awaitGroup848(t, fc, group, coord, len(members), 20*time.Second)
		checkFailover(t, fmt.Sprintf("after node %d's SIGSTOP", victim), before, view, clients, members)
	}

	clients := snapshotClients(members)
	time.Sleep(3 * time.Second) // production and consumption after the faults
	prod.Stop(45 * time.Second)
	logf("producer stopped: %d attempted, %d acknowledged", len(prod.History()), prod.Acked())

	overlaps := watch.Stop()
	if len(overlaps) > 0 {
		if zombies := fencedMembers(members); len(zombies) > 0 {
			t.Errorf("partitions owned by two members at once: %v; members %v lost their partitions (fenced while cut off), so these are zombie overlaps KIP-848 allows, but the failover should not have fenced anyone (see above)", overlaps, zombies)
		} else {
			t.Errorf("partitions owned by two members at once, no member fenced: KIP-848's revoke-before-assign rule broken: %v", overlaps)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The data: the log (fault checker), the group's consumption and
	// commits.
	if _, ok := fc.awaitFullISR(t, topic, 60*time.Second); !ok {
		t.Fatalf("the cluster did not recover\n%s", fc.evidence(topic, nil, 80))
	}
	ends := fc.stableEndOffsets(t, topic, 30*time.Second)
	history := prod.History()
	rep := checkFaultHistory(history, fc.readBack(t, topic, ends))
	acked := map[recKey]string{}
	for _, a := range history {
		if a.Outcome == faultAcked {
			acked[recKey{a.Partition, a.Offset}] = strconv.FormatInt(a.Seq, 10)
		}
	}
	logf("FAULT848 FIGURES [%s]: %s | rounds=%d freeze=%v", faultMode(t), rep.Figures(), rounds, freeze)
	if !rep.OK() {
		t.Errorf("history check failed: %s\n%s", rep.Figures(), rep.Details())
	}
	if rep.Acked == 0 {
		t.Fatalf("nothing was acknowledged")
	}
	checkAllConsumed(t, log, acked, 30*time.Second, members...)
	checkCommittedAtEndOfRecords(t, adm, group, topic, members...)
	final := awaitGroup848(t, fc, group, awaitCoordinator(t, fc, group, 0), len(members), 20*time.Second)
	checkFailover(t, "at the end", view, final, clients, members)
	closeAll()
}

// member848Opts are the options of the test's members beyond
// startFranzMember's: KIP-848, every node as a seed, and a metadata
// refresh every second.
//
// The refresh works around franz-go v1.21.7: its KIP-848 heartbeat does
// not forget a coordinator it cannot dial. ConsumerGroupHeartbeat is sent
// straight to the cached coordinator (client.go, handleCoordinatorReq:
// it may not be retried blindly), and manage848 retries a dial error in
// place, forever; only the other coordinator requests (OffsetCommit...)
// drop a coordinator that refuses connections, and a metadata refresh
// that no longer lists it (a fenced broker leaves Metadata) makes
// loadCoordinator ask FindCoordinator again. A member with partitions
// commits every 200 ms and so moves on within a heartbeat; a member that
// owns nothing yet (the one that just joined, when the coordinator dies
// in the rebalance) has nothing to commit, fetches nothing, and would
// dial the dead node until MetadataMaxAge (5 min by default), while the
// new coordinator fences it after its 6 s session: seen on the first
// runs, the new member was removed, the others carried on.
func member848Opts(fc *faultCluster) []kgo.Opt {
	return []kgo.Opt{kip848(), kgo.SeedBrokers(fc.AllAddrs()...), kgo.MetadataMaxAge(time.Second)}
}

// group848View is what ConsumerGroupDescribe tells of a group, as
// answered by its coordinator.
type group848View struct {
	coordinator     int
	state           string
	epoch           int32
	assignmentEpoch int32
	members         map[string]member848View // by member id
}

type member848View struct {
	client   string // client id: the franzMember's name
	epoch    int32
	assigned []int32 // of the test's topic (the only one)
}

func (v group848View) String() string {
	var ms []string
	for _, id := range slices.Sorted(maps.Keys(v.members)) {
		m := v.members[id]
		ms = append(ms, fmt.Sprintf("%s(%s…) epoch %d %v", m.client, id[:min(6, len(id))], m.epoch, m.assigned))
	}
	return fmt.Sprintf("coordinator %d, %s, group epoch %d, assignment epoch %d, members: %s",
		v.coordinator, v.state, v.epoch, v.assignmentEpoch, strings.Join(ms, ", "))
}

// awaitCoordinator returns group's coordinator as a healthy node answers
// FindCoordinator: a running node other than not (0: any). It fails the
// test after 30 s.
func awaitCoordinator(t testing.TB, fc *faultCluster, group string, not int) int {
	t.Helper()
	coord := -1
	waitUntil(t, 30*time.Second, fmt.Sprintf("a live coordinator of %s other than node %d", group, not), func() (bool, string) {
		var states []string
		for _, id := range fc.HealthyIDs() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			r := fc.Admin(id).FindGroupCoordinators(ctx, group)[group]
			cancel()
			switch {
			case r.Err != nil:
				states = append(states, fmt.Sprintf("node %d: %v", id, r.Err))
			case int(r.NodeID) == not || !fc.Healthy(int(r.NodeID)):
				states = append(states, fmt.Sprintf("node %d names node %d", id, r.NodeID))
			default:
				coord = int(r.NodeID)
				return true, ""
			}
		}
		return false, strings.Join(states, "; ")
	})
	return coord
}

// describe848At sends ConsumerGroupDescribe for group to node id itself
// (a client pinned to it), so the answer is that node's.
func describe848At(fc *faultCluster, id int, group string) (group848View, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, fc.Client(id))
	if err != nil {
		return group848View{}, err
	}
	if len(resp.Groups) != 1 {
		return group848View{}, fmt.Errorf("%d groups described", len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		msg := ""
		if g.ErrorMessage != nil {
			msg = *g.ErrorMessage
		}
		return group848View{}, fmt.Errorf("%w (%s)", err, msg)
	}
	v := group848View{coordinator: id, state: g.State, epoch: g.Epoch, assignmentEpoch: g.AssignmentEpoch, members: map[string]member848View{}}
	for _, m := range g.Members {
		var ps []int32
		for _, tp := range m.Assignment.TopicPartitions {
			ps = append(ps, tp.Partitions...)
		}
		v.members[m.MemberID] = member848View{client: m.ClientID, epoch: m.MemberEpoch, assigned: sorted32(ps)}
	}
	return v, nil
}

// awaitGroup848 waits until node coord describes group as Stable with n
// members.
func awaitGroup848(t testing.TB, fc *faultCluster, group string, coord, n int, timeout time.Duration) group848View {
	t.Helper()
	var v group848View
	waitUntil(t, timeout, fmt.Sprintf("node %d describes %s Stable with %d members", coord, group, n), func() (bool, string) {
		var err error
		if v, err = describe848At(fc, coord, group); err != nil {
			return false, err.Error()
		}
		return v.state == "Stable" && len(v.members) == n, v.String()
	})
	return v
}

// clientView is what a franz-go member knows of itself.
type clientView struct {
	memberID string
	epoch    int32
	owned    []int32
	lost     int // OnPartitionsLost calls that took partitions
}

func lostCount(m *franzMember) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.events {
		if strings.Contains(e, " lost[") {
			n++
		}
	}
	return n
}

func snapshotClients(members []*franzMember) map[string]clientView {
	out := map[string]clientView{}
	for _, m := range members {
		id, epoch := m.cl.GroupMetadata()
		out[m.name] = clientView{memberID: id, epoch: epoch, owned: m.Owned(), lost: lostCount(m)}
	}
	return out
}

// fencedMembers names the members that ever lost their partitions.
func fencedMembers(members []*franzMember) []string {
	var out []string
	for _, m := range members {
		if lostCount(m) > 0 {
			out = append(out, m.name)
		}
	}
	return out
}

// checkClientsMatch: the coordinator's view and the clients' agree on
// who is who, at which epoch, owning what.
func checkClientsMatch(t testing.TB, v group848View, members []*franzMember) {
	t.Helper()
	cs := snapshotClients(members)
	for _, m := range members {
		c := cs[m.name]
		dm, ok := v.members[c.memberID]
		switch {
		case !ok:
			t.Fatalf("%s (member id %s) is not in the group: %s", m.name, c.memberID, v)
		case dm.client != m.name || dm.epoch != c.epoch || !slices.Equal(dm.assigned, c.owned):
			t.Fatalf("%s knows itself as %s epoch %d owning %v; the coordinator: %s", m.name, c.memberID, c.epoch, c.owned, v)
		}
	}
}

// checkFailover compares the group before and after a fault, as the
// coordinators describe it and as the clients know it: same members, at
// member epochs not reset, with the same assignments, no rebalance, and
// no member that lost its partitions.
func checkFailover(t *testing.T, what string, before, after group848View, clients map[string]clientView, members []*franzMember) {
	t.Helper()
	var problems []string
	for _, id := range slices.Sorted(maps.Keys(before.members)) {
		b := before.members[id]
		a, ok := after.members[id]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("member %s (%s) is gone", id, b.client))
		case a.epoch < b.epoch || a.epoch <= 0:
			problems = append(problems, fmt.Sprintf("member %s (%s) went from epoch %d to %d", id, b.client, b.epoch, a.epoch))
		case !slices.Equal(a.assigned, b.assigned):
			problems = append(problems, fmt.Sprintf("member %s (%s) was assigned %v, now %v", id, b.client, b.assigned, a.assigned))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(after.members)) {
		if _, ok := before.members[id]; !ok {
			problems = append(problems, fmt.Sprintf("member %s (%s) is new: a member rejoined under a fresh id", id, after.members[id].client))
		}
	}
	if after.epoch != before.epoch || after.assignmentEpoch != before.assignmentEpoch {
		problems = append(problems, fmt.Sprintf("group epoch %d (assignment epoch %d) became %d (%d): the fault caused a rebalance",
			before.epoch, before.assignmentEpoch, after.epoch, after.assignmentEpoch))
	}
	now := snapshotClients(members)
	for _, m := range members {
		b, a := clients[m.name], now[m.name]
		if a.memberID != b.memberID {
			problems = append(problems, fmt.Sprintf("%s changed its member id %s to %s (franz-go rejoined as a new member)", m.name, b.memberID, a.memberID))
		}
		if a.epoch < b.epoch {
			problems = append(problems, fmt.Sprintf("%s went from epoch %d to %d", m.name, b.epoch, a.epoch))
		}
		if a.lost > b.lost {
			problems = append(problems, fmt.Sprintf("%s lost its partitions (OnPartitionsLost: fenced, it rejoined)", m.name))
		}
		if !slices.Equal(a.owned, b.owned) {
			problems = append(problems, fmt.Sprintf("%s owned %v, now %v", m.name, b.owned, a.owned))
		}
	}
	if len(problems) > 0 {
		t.Errorf("%s: the group did not carry on unchanged:\n  %s\nbefore: %s\nafter:  %s", what, strings.Join(problems, "\n  "), before, after)
		return
	}
	t.Logf("%s: same %d members at the same epochs and assignments (%s)", what, len(after.members), after)
}

// checkMembersKept compares the group before and after its coordinator
// died in a rebalance: every member of before is still there under its
// id, at a member epoch not below its old one, and never lost its
// partitions; every member described is one of the clients, under the
// id it has now (none rejoined under a fresh one).
func checkMembersKept(t *testing.T, what string, before, after group848View, clients map[string]clientView, members []*franzMember) {
	t.Helper()
	var problems []string
	for _, id := range slices.Sorted(maps.Keys(before.members)) {
		b := before.members[id]
		if a, ok := after.members[id]; !ok {
			problems = append(problems, fmt.Sprintf("member %s (%s) is gone", id, b.client))
		} else if a.epoch < b.epoch {
			problems = append(problems, fmt.Sprintf("member %s (%s) went from epoch %d to %d", id, b.client, b.epoch, a.epoch))
		}
	}
	now := snapshotClients(members)
	ids := map[string]string{}
	for _, m := range members {
		a := now[m.name]
		ids[a.memberID] = m.name
		if b, ok := clients[m.name]; ok && a.memberID != b.memberID {
			problems = append(problems, fmt.Sprintf("%s changed its member id %s to %s (franz-go rejoined as a new member)", m.name, b.memberID, a.memberID))
		}
		if a.lost > clients[m.name].lost {
			problems = append(problems, fmt.Sprintf("%s lost its partitions (OnPartitionsLost: fenced, it rejoined)", m.name))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(after.members)) {
		if name, ok := ids[id]; !ok || name != after.members[id].client {
			problems = append(problems, fmt.Sprintf("member %s (%s) is no client's current member id", id, after.members[id].client))
		}
	}
	if len(problems) > 0 {
		t.Errorf("%s: the members did not carry on:\n  %s\nbefore: %s\nafter:  %s", what, strings.Join(problems, "\n  "), before, after)
		return
	}
	t.Logf("%s: the %d members carried on at their epochs", what, len(before.members))
}

// dataLeaderBesides returns the running node other than not that leads
// the most partitions of topic, and how many it leads.
func dataLeaderBesides(t testing.TB, fc *faultCluster, topic string, not int) (int, int) {
	t.Helper()
	ls, err := fc.Leaders(topic)
	if err != nil {
		t.Fatalf("leaders of %s: %v", topic, err)
	}
	led := map[int]int{}
	for _, l := range ls {
		led[int(l)]++
	}
	victim := -1
	for _, id := range fc.IDs() {
		if id != not && fc.Healthy(id) && (victim < 0 || led[id] > led[victim]) {
			victim = id
		}
	}
	if victim < 0 {
		t.Fatalf("no healthy node besides %d", not)
	}
	return victim, led[victim]
}

// awaitHealed waits until topic and __consumer_offsets have every
// partition led with a full ISR, so that the next fault leaves both
// partitions' in-sync replicas at min.insync.replicas.
func awaitHealed(t testing.TB, fc *faultCluster, topic string) {
	t.Helper()
	for _, tp := range []string{topic, "__consumer_offsets"} {
		if _, ok := fc.awaitFullISR(t, tp, 45*time.Second); !ok {
			t.FailNow()
		}
	}
}

// checkCommittedAtEndOfRecords is checkCommittedAtEnd for a topic some of
// whose partitions may hold no record (the fault producer's 64 keys need
// not hash to all 12): nothing is committed there, nothing needs to be.
func checkCommittedAtEndOfRecords(t *testing.T, adm *kadm.Client, group, topic string, members ...*franzMember) {
	t.Helper()
	end := endOffsets(t, adm, topic)
	waitUntil(t, 15*time.Second, "committed offsets reach the end offsets", func() (bool, string) {
		for _, m := range members {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := m.cl.CommitMarkedOffsets(ctx); err != nil {
				t.Logf("%s CommitMarkedOffsets: %v", m.name, err)
			}
			cancel()
		}
		got := committedOffsets(t, adm, group, topic)
		ok := true
		for p, e := range end {
			if c, committed := got[p]; c != e && (committed || e > 0) {
				ok = false
			}
		}
		return ok, fmt.Sprintf("committed %s, end %s", fmtOffsets(got), fmtOffsets(end))
	})
}
