package quorum

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/cryptotest"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/fjordlog/fjord/controller"
)

func enc(b controller.Body) []byte { return controller.Encode(controller.NewRecord(b)) }

func reg(id int32) []byte {
	return enc(controller.RegisterBroker{
		ID: id, Incarnation: [16]byte{byte(id), 0xfe},
		Endpoints: []controller.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9092 + id}},
		Rack:      "r",
	})
}

// appliedAt returns the index at which member id applied data, or 0.
func (n *network) appliedAt(id uint64, data []byte) uint64 {
	for _, a := range n.applied[id] {
		if a.Kind == KindRecord && bytes.Equal(a.Data, data) {
			return a.Index
		}
	}
	return 0
}

// commit proposes data at the leader and runs until every live member in
// ids applied it; it returns the index.
func (n *network) commit(data []byte, ids ...uint64) uint64 {
	n.t.Helper()
	if len(ids) == 0 {
		ids = n.ids
	}
	l := n.waitLeader(ids...)
	if err := n.propose(l, data); err != nil {
		n.t.Fatalf("propose at %d: %v", l, err)
	}
	for range 200 {
		n.run(1)
		done := true
		for _, id := range ids {
			done = done && n.appliedAt(id, data) != 0
		}
		if done {
			idx := n.appliedAt(ids[0], data)
			for _, id := range ids {
				if got := n.appliedAt(id, data); got != idx {
					n.t.Fatalf("member %d applied at %d, member %d at %d", id, got, ids[0], idx)
				}
				for _, a := range n.applied[id] {
					if a.Index == idx && a.Err != nil {
						n.t.Fatalf("member %d: record did not apply: %v", id, a.Err)
					}
				}
			}
			return idx
		}
	}
	n.t.Fatalf("%x not committed on %v", data, ids)
	return 0
}

// checkAgree checks that no two members applied different entries at an
// index, that each member applied consecutive indexes (a snapshot may skip
// ahead), and, for members that never took a snapshot, that their history
// is a prefix of the longest such one.
func (n *network) checkAgree() {
	n.t.Helper()
	at := map[uint64]string{}
	var longest []string
	for _, id := range n.ids {
		prev := uint64(1) // the bootstrap snapshot
		snapped := false
		for _, a := range n.applied[id] {
			if a.Kind == KindSnapshot {
				snapped = true
				if a.Index < prev {
					n.t.Fatalf("member %d: snapshot %d after %d", id, a.Index, prev)
				}
				prev = a.Index
				continue
			}
			if a.Index != prev+1 && !(a.Index <= prev) { // <= prev: replay after a restart
				n.t.Fatalf("member %d: applied %d after %d", id, a.Index, prev)
			}
			prev = a.Index
			h := history([]Applied{a})[0]
			if o, ok := at[a.Index]; ok && o != h {
				n.t.Fatalf("index %d: member %d applied %s, another %s", a.Index, id, h, o)
			}
			at[a.Index] = h
		}
		if h := history(n.applied[id]); !snapped && len(h) > len(longest) {
			longest = h
		}
	}
	for _, id := range n.ids {
		h := history(n.applied[id])
		if !slices.ContainsFunc(n.applied[id], func(a Applied) bool { return a.Kind == KindSnapshot }) &&
			!slices.Equal(h, longest[:min(len(h), len(longest))]) {
			n.t.Fatalf("member %d's history is not a prefix of the longest", id)
		}
	}
}

// checkConverged checks that the live members ids have equal images at
// the same version.
func (n *network) checkConverged(ids ...uint64) {
	n.t.Helper()
	if len(ids) == 0 {
		ids = n.ids
	}
	m0 := n.members[ids[0]]
	want, err := encodeImage(m0.Image(), m0.bc)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, id := range ids {
		m := n.members[id]
		if m.Image().Version() != m0.Image().Version() || m.Applied() != m.Image().Version() {
			n.t.Fatalf("member %d at version %d (applied %d), member %d at %d", id, m.Image().Version(), m.Applied(), ids[0], m0.Image().Version())
		}
		got, err := encodeImage(m.Image(), m.bc)
		if err != nil {
			n.t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			n.t.Fatalf("member %d's image differs from member %d's", id, ids[0])
		}
		sameImage(n.t, m.Image(), m0.Image())
	}
}

// sameImage compares two images through their accessors.
func sameImage(t testing.TB, a, b *controller.Image) {
	t.Helper()
	if !reflect.DeepEqual(a.Brokers(), b.Brokers()) {
		t.Fatalf("brokers differ:\n%+v\n%+v", a.Brokers(), b.Brokers())
	}
	if !reflect.DeepEqual(a.Topics(), b.Topics()) {
		t.Fatalf("topics differ:\n%+v\n%+v", a.Topics(), b.Topics())
	}
	if !reflect.DeepEqual(a.ConfiguredGroups(), b.ConfiguredGroups()) {
		t.Fatalf("configured groups differ:\n%v\n%v", a.ConfiguredGroups(), b.ConfiguredGroups())
	}
	for _, g := range a.ConfiguredGroups() {
		if !reflect.DeepEqual(a.GroupConfigs(g), b.GroupConfigs(g)) {
			t.Fatalf("configs of group %q differ: %v vs %v", g, a.GroupConfigs(g), b.GroupConfigs(g))
		}
	}
	if a.NextProducerID() != b.NextProducerID() {
		t.Fatalf("next producer id %d vs %d", a.NextProducerID(), b.NextProducerID())
	}
	if !reflect.DeepEqual(a.QuotaEntities(), b.QuotaEntities()) {
		t.Fatalf("quota entities differ:\n%v\n%v", a.QuotaEntities(), b.QuotaEntities())
	}
	for _, e := range a.QuotaEntities() {
		if !reflect.DeepEqual(a.ClientQuotas(e), b.ClientQuotas(e)) {
			t.Fatalf("quotas of %v differ: %v vs %v", e, a.ClientQuotas(e), b.ClientQuotas(e))
		}
	}
	if !reflect.DeepEqual(a.ACLs(), b.ACLs()) {
		t.Fatalf("acls differ:\n%v\n%v", a.ACLs(), b.ACLs())
	}
	if !reflect.DeepEqual(a.ScramCredentials(), b.ScramCredentials()) {
		t.Fatalf("SCRAM credentials differ:\n%v\n%v", a.ScramCredentials(), b.ScramCredentials())
	}
	for _, k := range a.ScramCredentials() {
		x, _ := a.ScramCredential(k.User, k.Mechanism)
		y, _ := b.ScramCredential(k.User, k.Mechanism)
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("SCRAM credential %v differs", k)
		}
	}
	if !reflect.DeepEqual(a.RemotePartitions(), b.RemotePartitions()) {
		t.Fatalf("remote partitions differ:\n%v\n%v", a.RemotePartitions(), b.RemotePartitions())
	}
	for _, tp := range a.RemotePartitions() {
		if !reflect.DeepEqual(a.RemoteSegments(tp), b.RemoteSegments(tp)) {
			t.Fatalf("remote segments of %v differ:\n%+v\n%+v", tp, a.RemoteSegments(tp), b.RemoteSegments(tp))
		}
	}
}

func TestElectAndCommit(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 1)
	n := newNetwork(t, 1, []uint64{1, 2, 3}, nil)
	l := n.waitLeader()
	if ls := n.leaders(); !slices.Equal(ls, []uint64{l}) {
		t.Fatalf("leaders %v", ls)
	}
	term := n.members[l].Term()
	for _, id := range n.ids {
		if n.members[id].Term() != term || n.members[id].Leader() != l {
			t.Fatalf("member %d: term %d leader %d; want %d, %d", id, n.members[id].Term(), n.members[id].Leader(), term, l)
		}
	}
	idx := n.commit(reg(7))
	for _, id := range n.ids {
		img := n.members[id].Image()
		b, ok := img.Broker(7)
		if !ok || b.Epoch != int64(idx) || !b.Fenced {
			t.Fatalf("member %d: broker 7 = %+v, %t; want epoch %d", id, b, ok, idx)
		}
		if img.Version() != idx {
			t.Fatalf("member %d: version %d, want %d", id, img.Version(), idx)
		}
	}
	n.checkConverged()
	n.checkAgree()

	// Followers forward proposals; garbage is refused before raft sees it.
	f := n.ids[0]
	if f == l {
		f = n.ids[1]
	}
	n.commit(enc(controller.UnfenceBroker{ID: 7, Epoch: int64(idx)}))
	if err := n.members[f].Propose([]byte("junk")); !errors.Is(err, controller.ErrCorrupt) {
		t.Fatalf("junk proposal: %v", err)
	}
	noopRec := enc(controller.SetConfig{Resource: controller.ClusterResource(), Key: noopKey})
	if err := n.members[f].Propose(noopRec); err == nil {
		t.Fatal("proposal of the reserved key accepted")
	}
	n.checkConverged()
	n.checkAgree()
}

func TestLeaderIsolated(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 2)
	n := newNetwork(t, 2, []uint64{1, 2, 3}, nil)
	for i := range int32(3) {
		n.commit(reg(i + 1))
	}
	old := n.waitLeader()
	oldTerm := n.members[old].Term()
	var rest []uint64
	for _, id := range n.ids {
		if id != old {
			rest = append(rest, id)
		}
	}

	n.isolate(old)
	// The old leader still believes it leads: it takes the proposal into its
	// log, but cannot commit it.
	lost := [][]byte{reg(900)}
	if err := n.propose(old, lost[0]); err != nil {
		t.Fatalf("propose at isolated leader: %v", err)
	}
	nl := n.waitLeader(rest...)
	if nl == old || n.members[nl].Term() <= oldTerm {
		t.Fatalf("new leader %d at term %d; old %d at %d", nl, n.members[nl].Term(), old, oldTerm)
	}
	for i := range int32(5) {
		n.commit(reg(10+i), rest...)
	}
	// CheckQuorum: by now the old leader stepped down and drops proposals.
	if n.members[old].IsLeader() {
		t.Fatal("isolated leader did not step down")
	}
	if err := n.propose(old, reg(901)); !errors.Is(err, raft.ErrProposalDropped) {
		t.Fatalf("proposal at the deposed leader: %v", err)
	}
	lost = append(lost, reg(901))
	n.run(30)
	if n.members[old].Term() != oldTerm {
		t.Fatalf("isolated member's term moved %d → %d (PreVote should hold it)", oldTerm, n.members[old].Term())
	}

	n.heal()
	n.run(30)
	if n.members[old].IsLeader() || n.members[old].Leader() != nl {
		t.Fatalf("old leader: leader=%t, follows %d; want follower of %d", n.members[old].IsLeader(), n.members[old].Leader(), nl)
	}
	n.commit(reg(20))
	n.checkConverged()
	n.checkAgree()
	for _, id := range n.ids {
		for _, d := range lost {
			if n.appliedAt(id, d) != 0 {
				t.Fatalf("member %d applied a proposal of the isolated leader", id)
			}
		}
		if _, ok := n.members[id].Image().Broker(900); ok {
			t.Fatalf("member %d has broker 900", id)
		}
		for _, b := range []int32{1, 2, 3, 10, 11, 12, 13, 14, 20} {
			if _, ok := n.members[id].Image().Broker(b); !ok {
				t.Fatalf("member %d lost broker %d", id, b)
			}
		}
	}
}

func TestMinorityPartition(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 3)
	n := newNetwork(t, 3, []uint64{1, 2, 3}, nil)
	n.commit(reg(1))
	l := n.waitLeader()
	term := n.members[l].Term()
	f := n.ids[0]
	if f == l {
		f = n.ids[1]
	}
	var rest []uint64
	for _, id := range n.ids {
		if id != f {
			rest = append(rest, id)
		}
	}
	watch := func(phase string, ticks int) {
		for range ticks {
			n.run(1)
			for _, id := range n.ids {
				m := n.members[id]
				if m.IsLeader() && id != l {
					t.Fatalf("%s: member %d became leader", phase, id)
				}
				if m.Term() != term {
					t.Fatalf("%s: member %d at term %d, want %d", phase, id, m.Term(), term)
				}
			}
		}
	}

	// Fully cut off: f keeps pre-voting, never gets a term bump or a lead.
	n.isolate(f)
	watch("isolated", 100)
	n.commit(reg(2), rest...)
	watch("isolated", 100)
	n.heal()
	watch("healed", 20)
	n.commit(reg(3))
	n.checkConverged()

	// One direction: f no longer hears the leader, but the leader hears f.
	// The other follower and the leader refuse f's pre-votes (their lease
	// with the leader is current), so nothing is disrupted.
	n.cutLink(l, f)
	watch("one-way", 100)
	n.commit(reg(4), rest...)
	n.heal()
	watch("healed", 20)
	n.commit(reg(5))
	n.checkConverged()
	n.checkAgree()
}

func TestLearner(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 4)
	n := newNetwork(t, 4, []uint64{1, 2, 3}, []uint64{4})
	campaigned := func() bool {
		return slices.ContainsFunc(n.sent, func(m raftpb.Message) bool {
			return m.From == 4 && (m.Type == raftpb.MsgVote || m.Type == raftpb.MsgPreVote ||
				m.Type == raftpb.MsgVoteResp || m.Type == raftpb.MsgPreVoteResp)
		})
	}
	for i := range int32(5) {
		n.commit(reg(i + 1))
	}
	n.checkConverged()
	if n.members[4].Image().Version() != n.members[1].Image().Version() {
		t.Fatal("learner behind")
	}
	if cs := n.members[4].confState; !slices.Contains(cs.Learners, 4) || slices.Contains(cs.Voters, 4) {
		t.Fatalf("learner conf state %v", cs)
	}
	// A learner's proposal is forwarded to the leader.
	if err := n.propose(4, reg(40)); err != nil {
		t.Fatal(err)
	}
	n.run(5)
	if n.appliedAt(4, reg(40)) == 0 {
		t.Fatal("learner's proposal not committed")
	}

	// Cut off, the learner waits: no campaign, no term change.
	term := n.members[4].Term()
	n.isolate(4)
	n.run(100)
	n.heal()
	n.run(10)
	// Leader gone and a voter crashed: one voter left, no quorum; the
	// learner still never campaigns.
	l := n.waitLeader()
	n.down[l] = true
	other := n.ids[0]
	if other == l {
		other = n.ids[1]
	}
	n.down[other] = true
	for range 200 {
		n.run(1)
		if n.members[4].IsLeader() {
			t.Fatal("learner leads")
		}
	}
	if campaigned() {
		t.Fatal("the learner sent or answered a vote")
	}
	if n.members[4].Term() < term {
		t.Fatal("term went back")
	}
	// Voters back: a leader again, and the learner follows it.
	clear(n.down)
	n.commit(reg(41))
	n.checkConverged()
	n.checkAgree()
	if campaigned() {
		t.Fatal("the learner sent or answered a vote")
	}
}

// TestPromoteLearner promotes the learner to voter by a conf change; the
// snapshot taken afterwards carries the new configuration.
func TestPromoteLearner(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 5)
	n := newNetwork(t, 5, []uint64{1, 2, 3}, []uint64{4})
	n.commit(reg(1))
	l := n.waitLeader()
	cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddNode, NodeID: 4}}}
	if err := n.members[l].ProposeConfChange(cc); err != nil {
		t.Fatal(err)
	}
	n.run(10)
	for _, id := range n.ids {
		cs := n.members[id].confState
		if !slices.Contains(cs.Voters, 4) || slices.Contains(cs.Learners, 4) {
			t.Fatalf("member %d: conf state %v", id, cs)
		}
	}
	n.commit(reg(2))
	n.checkConverged()
	n.checkAgree()
	if !strings.Contains(strings.Join(history(n.applied[4]), "\n"), "confchange") {
		t.Fatal("learner did not apply the conf change")
	}
}

// TestJoin adds a learner to a running quorum whose log was compacted: it
// starts empty (Join), gets the leader's snapshot and then the entries.
func TestJoin(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 8)
	n := newNetworkCatchUp(t, 8, []uint64{1, 2, 3}, nil, 1)
	n.snapEvery = 4
	for i := range int32(10) {
		n.commit(reg(i + 1))
	}
	l := n.waitLeader()
	cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode, NodeID: 5}}}
	if err := n.members[l].ProposeConfChange(cc); err != nil {
		t.Fatal(err)
	}
	n.run(5)
	n.logs[5] = NewMemoryLog()
	m, err := NewMember(Config{ID: 5, Join: true, Log: n.logs[5]})
	if err != nil {
		t.Fatal(err)
	}
	if m.Applied() != 0 || m.Image().Version() != 0 {
		t.Fatalf("joiner starts at %d", m.Applied())
	}
	n.members[5] = m
	n.ids = append(n.ids, 5)
	n.commit(reg(50))
	if !slices.ContainsFunc(n.applied[5], func(a Applied) bool { return a.Kind == KindSnapshot }) {
		t.Fatal("joiner did not start from a snapshot")
	}
	if cs := n.members[5].confState; !slices.Contains(cs.Learners, 5) || len(cs.Voters) != 3 {
		t.Fatalf("joiner's conf state %v", cs)
	}
	n.checkConverged()
	n.checkAgree()
}
