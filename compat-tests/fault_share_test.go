package compattests

// TestFaultShareGroupKills: a KIP-932 share group rides out the SIGKILL of
// its group coordinator and of a data partition leader.
//
// Three fjord processes (the fault cluster: RF 3 for data, the offsets
// topic and __share_group_state, min.insync.replicas=2; share members
// heartbeating every 500 ms with a 12 s session), a 4-partition topic, the
// fault workload's idempotent acks=all producer throughout, and six
// franz-go share consumers accepting everything (each partition shared
// by two of them). Then, per round:
//
//  1. the group's coordinator (FindCoordinator key type 0) is killed with
//     SIGKILL; another node must load the group from __consumer_offsets
//     and describe it with the same members at the same group epoch, and
//     still so a full session later (the members heartbeat it: a member
//     that did not would be removed, bumping the epoch; this holds only
//     once the broker applies the configured session, which
//     TestShareGroupSessionConfig checks: until then sessions are 45 s
//     and the check is weaker); the killed node restarts after at least
//     4 s;
//  2. the node leading the most data partitions, other than the
//     coordinator, is killed with SIGKILL for 4 s (past the 3 s broker
//     session timeout, so its leaderships move) and restarted.
//
// Why a 12 s session and not 6 s: the members must not be fenced by the
// faults, and a member's heartbeat can be slowed by a kill that is not
// its coordinator's. franz-go sends ShareAcknowledge and
// ShareGroupHeartbeat on one connection, and responses go in request
// order; an acknowledgement is answered only once the share coordinator
// stored it, so when the killed node was a share coordinator (and, as
// seen, the controller quorum's leader too) the heartbeat's response
// waits for an election, the 3 s broker session and the persister's next
// retry: about 8 s once with a 6 s session, which fenced the member. The
// broker had applied that heartbeat in time; the client sends the next
// only after its response. Kafka would not even read the heartbeat until
// the acknowledgement was answered. The default session (45 s) outlasts
// this by far.
//
// After each fault every member must accept records again. Which nodes
// are share coordinators (FindCoordinator key type 2, key
// "group:topicId:partition", the leader of the __share_group_state
// partition the key hashes to) is logged before each kill; a coordinator
// kill often takes some of them down too.
//
// FJORD_FAULTS unset or "short": one round, about 30 s. "full": two
// rounds, then a SIGKILL of the node that is share coordinator of the
// most of the group's share-partitions (other than the group
// coordinator, when another node is one). Between faults the data
// topic, __consumer_offsets and __share_group_state get back their full
// ISRs.
//
// What must hold, and why:
//
//   - At least once. Every acknowledged produced record is delivered and
//     accepted at least once, and every share-partition's start offset
//     (the share coordinator's summary, as DescribeShareGroupOffsets
//     reads it) ends at its partition's end offset: nothing is left
//     available or acquired.
//   - Accepted stays done. KIP-932, as Kafka implements it: an
//     acknowledgement is answered without error only once the record is
//     done for good, ACKNOWLEDGED or ARCHIVED and written through the
//     share coordinator (SharePartition completes it after
//     WriteShareGroupState), so it is never delivered to the group again,
//     through leader and coordinator failovers. Done by this
//     acknowledgement, or done already: Kafka answers an acknowledgement
//     of offsets wholly below the share-partition start offset without
//     error ("already archived"), and so does Fjord, so a consumer whose
//     lock was taken from it (its share session ended, its leader
//     changed) gets a success for its late ACCEPT of a record another
//     consumer accepted meanwhile. Seen here: a member accepted records
//     delivered at count 1 while the node it fetched them from lost its
//     share coordinator (SIGKILL); its flush took over 5 s; meanwhile
//     another member acquired them at count 2 and accepted them; then
//     the first ACCEPT succeeded. So the check: no delivery of a record
//     is acquired after an acceptance of it was confirmed (franz-go's
//     kgo.ShareAckCallback results, per partition and acknowledgement
//     flush; see shareMember). An acknowledgement that failed (or whose
//     result never came) promises nothing: the record may be delivered
//     again (its lock expired, its leader changed, the write failed) or
//     not (the state was written and the answer lost); records accepted
//     only with failed acknowledgements and not delivered again are
//     counted, not failed.
//   - Delivery counts never go down: per record, in acquisition order
//     (when each consumer decoded it), every delivery count is at least
//     1 and not below the previous one. Kafka does not promise this
//     across a share-partition leader change (it does not persist
//     acquisitions: a record acquired, not acknowledged, by the old
//     leader comes back from the new one with its count as last
//     written); Fjord does (group/sharepart persists each acquisition's
//     count), and promises more, which is checked too: no two deliveries
//     of a record with the same count.
//   - The log: every acknowledged record is in the final log once, in
//     order (the fault checker on a full read-back).

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

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestFaultShareGroupKills(t *testing.T) {
	const (
		topic, group = "faultshare", "faultshare-group"
		partitions   = 4
		nMembers     = 6
		rate         = 300 // records per second
		dataDown     = 4 * time.Second
		minCoordDown = 4 * time.Second
		session      = 12 * time.Second
	)
	rounds, stateKill := 1, false
	if faultMode(t) == "full" {
		rounds, stateKill = 2, true
	}
	begin := time.Now()
	fc := startFaultCluster(t, 3, append(slices.Clone(shareBrokerOverrides),
		"group.share.min.session.timeout.ms=6000", fmt.Sprintf("group.share.session.timeout.ms=%d", session.Milliseconds()))...)
	fc.createFaultTopic(t, topic, partitions)
	md, err := fc.Metadata(1, topic)
	if err != nil {
		t.Fatal(err)
	}
	topicID := [16]byte(md.Topics[topic].ID)
	var nodeClients []*kgo.Client
	for _, id := range fc.IDs() {
		nodeClients = append(nodeClients, fc.Client(id))
	}
	setShareConfigs(t, group, nodeClients, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "15000")
	logDir := t.TempDir()
	if keep := os.Getenv("FJORD_FAULT_LOGS"); keep != "" {
		t.Cleanup(func() { keepFaultLogs(t, fc, logDir, filepath.Join(keep, t.Name()+"-"+time.Now().Format("150405"))) })
	}
	prod := startFaultProducer(t, fc, topic, rate, logDir)
	cl := newClient(t, fc.Addr(1), kgo.SeedBrokers(fc.AllAddrs()...), kgo.MetadataMinAge(250*time.Millisecond))
	logf := func(format string, args ...any) {
		t.Logf("t+%5.1fs %s", time.Since(begin).Seconds(), fmt.Sprintf(format, args...))
	}

	log := newShareLog(15 * time.Second)
	var members []*shareMember
	for i := range nMembers {
		// A metadata refresh every second: see member848Opts (the same
		// franz-go heartbeat loop sticks to a dead coordinator).
		members = append(members, startShareMember(t, fmt.Sprintf("s%d", i), fc.AllAddrs(), group, topic, log, nil, kgo.MetadataMaxAge(time.Second)))
	}
	closed := false
	closeAll := func() {
		if !closed {
			closed = true
			for _, m := range members {
				m.Close(10 * time.Second)
			}
		}
	}
	t.Cleanup(closeAll)
	dumpOnFailure(t, log, members)

	awaitBusy := func(what string, since time.Time) {
		t.Helper()
		d := waitUntil(t, 45*time.Second, what+": every member accepts records", func() (bool, string) {
			got := log.confirmedAccepts(func(d shareDelivery) bool { return d.polled.After(since) })
			for _, m := range members {
				if got[m.name] == 0 {
					return false, fmt.Sprintf("confirmed accepts per member since %s: %v", since.Format("15:04:05.000"), got)
				}
			}
			return true, ""
		})
		logf("%s: every member accepting %v later", what, d.Round(time.Millisecond))
	}
	awaitBusy("start", begin)
	coord := awaitCoordinator(t, fc, group, 0)
	view := awaitShareGroup(t, fc, group, coord, nMembers, 20*time.Second)
	logf("before the faults: node %d coordinates: %s", coord, view)

	for round := range rounds {
		// 1. The group coordinator.
		before := view
		old := coord
		logf("round %d: %s", round+1, shareRoles(fc, cl, group, topic, topicID, partitions))
		fc.Kill(old)
		killed := time.Now()
		logf("round %d: SIGKILL node %d, the coordinator of %s; %d acknowledged so far", round+1, old, group, prod.Acked())
		coord = awaitCoordinator(t, fc, group, old)
		after := awaitShareGroup(t, fc, group, coord, nMembers, 30*time.Second)
		logf("round %d: node %d coordinates %s %v after the kill: %s", round+1, coord, group, time.Since(killed).Round(time.Millisecond), after)
		// The members must heartbeat the new coordinator: a full
		// session after it loaded the group, they are all still there.
		time.Sleep(session)
		after = awaitShareGroup(t, fc, group, coord, nMembers, 10*time.Second)
		checkShareFailover(t, fmt.Sprintf("round %d: node %d after node %d's SIGKILL", round+1, coord, old), before, after)
		awaitBusy(fmt.Sprintf("round %d: after node %d's SIGKILL", round+1, old), killed)
		time.Sleep(time.Until(killed.Add(minCoordDown)))
		st := time.Now()
		fc.Restart(old)
		logf("round %d: node %d restarted and serving after %v", round+1, old, time.Since(st).Round(time.Millisecond))
		awaitShareHealed(t, fc, topic)

		// 2. A data leader, not the coordinator.
		before = after
		victim, led := dataLeaderBesides(t, fc, topic, coord)
		logf("round %d: %s", round+1, shareRoles(fc, cl, group, topic, topicID, partitions))
		fc.Kill(victim)
		logf("round %d: SIGKILL node %d, leader of %d of %d partitions of %s (not the coordinator, node %d); %d acknowledged so far",
			round+1, victim, led, partitions, topic, coord, prod.Acked())
		time.Sleep(dataDown)
		st = time.Now()
		fc.Restart(victim)
		logf("round %d: node %d restarted and serving after %v", round+1, victim, time.Since(st).Round(time.Millisecond))
		awaitShareHealed(t, fc, topic)
		awaitBusy(fmt.Sprintf("round %d: node %d back", round+1, victim), time.Now())
		coord = awaitCoordinator(t, fc, group, 0)
		view = awaitShareGroup(t, fc, group, coord, nMembers, 20*time.Second)
		checkShareFailover(t, fmt.Sprintf("round %d: after node %d's SIGKILL (a data leader)", round+1, victim), before, view)
	}

	if stateKill {
		// 3. The share coordinator of the most share-partitions.
		byNode := map[int]int{}
		for p := range int32(partitions) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			n, err := findShareCoordinator(ctx, cl, group, topicID, p)
			cancel()
			if err != nil {
				t.Fatalf("share coordinator of p%d: %v", p, err)
			}
			byNode[int(n)]++
		}
		// Prefer a node other than the group coordinator, to see the
		// share coordinators' failover on its own.
		victim := -1
		for _, id := range fc.IDs() {
			if byNode[id] == 0 {
				continue
			}
			if victim < 0 || (victim == coord && id != coord) || (id != coord && byNode[id] > byNode[victim]) {
				victim = id
			}
		}
		before := view
		logf("%s", shareRoles(fc, cl, group, topic, topicID, partitions))
		fc.Kill(victim)
		logf("SIGKILL node %d, share coordinator of %d of the %d share-partitions (group coordinator: node %d); %d acknowledged so far",
			victim, byNode[victim], partitions, coord, prod.Acked())
		time.Sleep(dataDown)
		fc.Restart(victim)
		awaitShareHealed(t, fc, topic)
		awaitBusy(fmt.Sprintf("node %d back (a share coordinator)", victim), time.Now())
		coord = awaitCoordinator(t, fc, group, 0)
		view = awaitShareGroup(t, fc, group, coord, nMembers, 20*time.Second)
		checkShareFailover(t, fmt.Sprintf("after node %d's SIGKILL (a share coordinator)", victim), before, view)
	}

	time.Sleep(2 * time.Second) // production and consumption after the faults
	prod.Stop(45 * time.Second)
	history := prod.History()
	acked := map[recKey]string{}
	for _, a := range history {
		if a.Outcome == faultAcked {
			acked[recKey{a.Partition, a.Offset}] = strconv.FormatInt(a.Seq, 10)
		}
	}
	logf("producer stopped: %d attempted, %d acknowledged", len(history), len(acked))
	if len(acked) == 0 {
		t.Fatalf("nothing was acknowledged")
	}
	if _, ok := fc.awaitFullISR(t, topic, 60*time.Second); !ok {
		t.Fatalf("the cluster did not recover\n%s", fc.evidence(topic, nil, 80))
	}
	ends := fc.stableEndOffsets(t, topic, 30*time.Second)
	waitUntil(t, 60*time.Second, "every acknowledged record accepted", func() (bool, string) {
		miss := log.missing(acked, false)
		return len(miss) == 0, fmt.Sprintf("%d of %d never accepted, e.g. %v", len(miss), len(acked), miss[:min(5, len(miss))])
	})
	awaitShareDone(t, cl, group, topicID, ends, 60*time.Second)
	closeAll()

	rep := checkFaultHistory(history, fc.readBack(t, topic, ends))
	if !rep.OK() {
		t.Errorf("history check failed: %s\n%s", rep.Figures(), rep.Details())
	}
	unconfirmed := log.missing(acked, true)
	logf("FAULTSHARE FIGURES [%s]: %s | %s | %d accepted only with failed or unknown acknowledgements, not delivered again | rounds=%d stateKill=%v",
		faultMode(t), rep.Figures(), log.figures(), len(unconfirmed), rounds, stateKill)
	checkShareLog(t, log, acked)
}

// awaitShareGroup waits until node coord describes group as Stable with n
// members, every one at the group epoch (it heartbeated since the last
// change).
func awaitShareGroup(t testing.TB, fc *faultCluster, group string, coord, n int, timeout time.Duration) shareGroupView {
	t.Helper()
	var v shareGroupView
	waitUntil(t, timeout, fmt.Sprintf("node %d describes %s Stable with %d members", coord, group, n), func() (bool, string) {
		var err error
		if v, err = describeShareGroup(fc.Client(coord), group); err != nil {
			return false, err.Error()
		}
		ok := v.state == "Stable" && len(v.members) == n
		for _, m := range v.members {
			ok = ok && m.epoch == v.epoch
		}
		return ok, v.String()
	})
	return v
}

// checkShareFailover compares the group before and after a fault: the
// same member ids and clients, at the same group epoch (a member removed
// and rejoined bumps it twice), no member epoch gone down.
func checkShareFailover(t *testing.T, what string, before, after shareGroupView) {
	t.Helper()
	var problems []string
	for _, id := range slices.Sorted(maps.Keys(before.members)) {
		b := before.members[id]
		a, ok := after.members[id]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("member %s (%s) is gone", id, b.client))
		case a.client != b.client:
			problems = append(problems, fmt.Sprintf("member %s was client %s, now %s", id, b.client, a.client))
		case a.epoch < b.epoch:
			problems = append(problems, fmt.Sprintf("member %s (%s) went from epoch %d to %d", id, b.client, b.epoch, a.epoch))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(after.members)) {
		if _, ok := before.members[id]; !ok {
			problems = append(problems, fmt.Sprintf("member %s (%s) is new", id, after.members[id].client))
		}
	}
	if after.epoch != before.epoch {
		problems = append(problems, fmt.Sprintf("group epoch %d became %d: members left or joined", before.epoch, after.epoch))
	}
	if len(problems) > 0 {
		t.Errorf("%s: the group did not carry on unchanged:\n  %s\nbefore: %s\nafter:  %s", what, strings.Join(problems, "\n  "), before, after)
		return
	}
	t.Logf("%s: same members, same group epoch: %s", what, after)
}

// shareRoles describes who does what: the group coordinator, the share
// coordinator and the leader of each partition of topic.
func shareRoles(fc *faultCluster, cl *kgo.Client, group, topic string, topicID [16]byte, partitions int32) string {
	var parts []string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := fc.Admin(fc.HealthyIDs()[0]).FindGroupCoordinators(ctx, group)[group]
	parts = append(parts, fmt.Sprintf("group coordinator node %d (%v)", r.NodeID, r.Err))
	ls, err := fc.Leaders(topic)
	if err != nil {
		parts = append(parts, err.Error())
	}
	for p := range partitions {
		n, err := findShareCoordinator(ctx, cl, group, topicID, p)
		if err != nil {
			parts = append(parts, fmt.Sprintf("p%d: leader %d, share coordinator: %v", p, ls[p], err))
			continue
		}
		parts = append(parts, fmt.Sprintf("p%d: leader %d, share coordinator %d", p, ls[p], n))
	}
	return strings.Join(parts, "; ")
}

// awaitShareHealed waits until topic, __consumer_offsets and
// __share_group_state have every partition led with a full ISR.
func awaitShareHealed(t testing.TB, fc *faultCluster, topic string) {
	t.Helper()
	for _, tp := range []string{topic, "__consumer_offsets", "__share_group_state"} {
		if _, ok := fc.awaitFullISR(t, tp, 45*time.Second); !ok {
			t.FailNow()
		}
	}
}
