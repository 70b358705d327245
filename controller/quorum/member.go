// Package quorum is the core of Fjord's metadata quorum: one raft member
// (etcd raft's RawNode) whose log is the metadata log and whose state
// machine is a controller.Image. It has no sockets, disks, goroutines or
// clocks: the driver ticks it, steps it with received messages, calls Ready
// and sends what Ready returns, so tests drive whole clusters
// deterministically.
//
// Voters are the controllers. A member may also be a raft learner, which
// receives and applies every committed entry but never votes or campaigns
// (raft does not let a learner campaign); Fjord's broker-only nodes are not
// members at all, though: they follow the log outside the quorum, applying
// what voters ship them (follow.go).
package quorum

import (
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/fjordlog/fjord/controller"
)

// Config configures a Member.
type Config struct {
	ID uint64 // non-zero; in Voters or Learners
	// Voters and Learners bootstrap an empty Log: the first member started
	// over an empty log writes an initial snapshot (index 1, term 1) holding
	// this configuration; every bootstrapping member must be given the same
	// one. Over a non-empty Log they are ignored: the log's configuration
	// (snapshot plus conf change entries) rules.
	Voters, Learners []uint64
	// Join starts a member added to a running quorum by a conf change: over
	// an empty Log it does not bootstrap but waits for the leader, which
	// sends it a snapshot. Voters and Learners are then unused.
	Join bool
	Log  Log
	// CatchUpEntries is how many entries MaybeSnapshot keeps below a new
	// snapshot, so a follower slightly behind still gets entries rather
	// than the whole snapshot.
	CatchUpEntries uint64
	// Logger gets raft's log; nil discards it (Panic and Fatal still panic).
	Logger raft.Logger
}

// Kind says what an Applied is.
type Kind uint8

const (
	KindRecord     Kind = iota + 1 // a metadata record
	KindEmpty                      // an empty entry (a new leader's first)
	KindConfChange                 // a raft membership change
	KindSnapshot                   // the image was replaced from a snapshot
)

func (k Kind) String() string {
	switch k {
	case KindRecord:
		return "record"
	case KindEmpty:
		return "empty"
	case KindConfChange:
		return "confchange"
	case KindSnapshot:
		return "snapshot"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Applied is one committed log entry (or snapshot) that Ready applied. After
// it, the image's Version is Index.
type Applied struct {
	Index, Term uint64
	Kind        Kind
	Data        []byte            // the entry's data; for KindSnapshot the snapshot's
	Record      controller.Record // KindRecord: the decoded record (maybe a controller.Batch)
	// Err is set when a KindRecord did not apply (it wraps
	// controller.ErrNotApplicable). Apply is deterministic, so every member
	// skips the record alike and the images stay equal; only the version
	// advances. A Batch is skipped whole. Validated proposals never do
	// this: log it as a bug.
	Err error
}

// Member is one member of the metadata quorum. It is not safe for
// concurrent use; the *controller.Image values it hands out are.
type Member struct {
	id        uint64
	rn        *raft.RawNode
	log       Log
	img       *controller.Image
	bc        brokerConfigs // shadow of img's broker configs, for snapshots
	applied   uint64        // == img.Version()
	confState raftpb.ConfState
	snapIndex uint64 // index of the log's latest snapshot
	catchUp   uint64
	err       error // sticky: a failed write or a corrupt committed entry
}

// NewMember starts a member over cfg.Log, bootstrapping it if empty, and
// rebuilds its image from the log's snapshot; raft then re-delivers the
// committed entries after it through Ready.
func NewMember(cfg Config) (*Member, error) {
	if cfg.ID == 0 || cfg.Log == nil {
		return nil, errors.New("quorum: Config needs an ID and a Log")
	}
	hs, _, err := cfg.Log.InitialState()
	if err != nil {
		return nil, err
	}
	last, err := cfg.Log.LastIndex()
	if err != nil {
		return nil, err
	}
	if last == 0 && raft.IsEmptyHardState(hs) && !cfg.Join {
		if err := checkMembership(cfg); err != nil {
			return nil, err
		}
		boot := raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{
			Index: 1, Term: 1,
			ConfState: raftpb.ConfState{Voters: slices.Clone(cfg.Voters), Learners: slices.Clone(cfg.Learners)},
		}}
		if err := cfg.Log.Save(raftpb.HardState{Term: 1, Commit: 1}, nil, boot); err != nil {
			return nil, fmt.Errorf("quorum: bootstrap: %w", err)
		}
	}
	snap, err := cfg.Log.Snapshot()
	if err != nil {
		return nil, err
	}
	img, bc, err := decodeImage(snap.Data, snap.Metadata.Index)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = discardLogger{}
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:              cfg.ID,
		ElectionTick:    10,
		HeartbeatTick:   1,
		Storage:         cfg.Log,
		Applied:         snap.Metadata.Index,
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 256,
		PreVote:         true,
		CheckQuorum:     true,
		Logger:          logger,
	})
	if err != nil {
		return nil, err
	}
	return &Member{
		id: cfg.ID, rn: rn, log: cfg.Log, img: img, bc: bc,
		applied: snap.Metadata.Index, confState: snap.Metadata.ConfState,
		snapIndex: snap.Metadata.Index, catchUp: cfg.CatchUpEntries,
	}, nil
}

func checkMembership(cfg Config) error {
	if len(cfg.Voters) == 0 {
		return errors.New("quorum: bootstrap needs voters")
	}
	seen := map[uint64]bool{}
	for _, id := range slices.Concat(cfg.Voters, cfg.Learners) {
		if id == 0 || seen[id] {
			return fmt.Errorf("quorum: bootstrap: id %d zero or listed twice", id)
		}
		seen[id] = true
	}
	if !seen[cfg.ID] {
		return fmt.Errorf("quorum: bootstrap: member %d is neither voter nor learner", cfg.ID)
	}
	return nil
}

// ID is the member's raft id.
func (m *Member) ID() uint64 { return m.id }

// Image is the image after the last applied entry; Image().Version() ==
// Applied().
func (m *Member) Image() *controller.Image { return m.img }

// Applied is the index of the last applied entry.
func (m *Member) Applied() uint64 { return m.applied }

// IsLeader reports whether this member is the raft leader (it may not know
// yet that it was deposed).
func (m *Member) IsLeader() bool { return m.rn.BasicStatus().RaftState == raft.StateLeader }

// Leader is the leader this member knows of, 0 if none.
func (m *Member) Leader() uint64 { return m.rn.BasicStatus().Lead }

// Term is the member's current raft term.
func (m *Member) Term() uint64 { return m.rn.BasicStatus().Term }

// Status is raft's full status, for debugging and metrics.
func (m *Member) Status() raft.Status { return m.rn.Status() }

// Err is the error that stopped the member, if any.
func (m *Member) Err() error { return m.err }

// Tick advances the member's logical clock by one tick (election timeout 10
// ticks, heartbeat 1).
func (m *Member) Tick() { m.rn.Tick() }

// Campaign starts an election now instead of after an election timeout. A
// quorum of one uses it to lead from its first moment.
func (m *Member) Campaign() error {
	if m.err != nil {
		return m.err
	}
	return m.rn.Campaign()
}

// Step hands the member a message received from a peer. A message no
// legitimate member sends, and that raft would panic on or be corrupted by,
// is refused with an error wrapping ErrRefused and changes nothing
// (guard.go).
func (m *Member) Step(msg raftpb.Message) error {
	if m.err != nil {
		return m.err
	}
	if err := m.check(msg); err != nil {
		return err
	}
	return m.rn.Step(msg)
}

// Propose proposes an encoded controller record. The data must decode: a
// committed entry that does not stops every member. It returns
// raft.ErrProposalDropped when there is no leader to take it. Committing is
// not guaranteed: watch Ready's Applied for it.
func (m *Member) Propose(data []byte) error {
	if m.err != nil {
		return m.err
	}
	if err := checkProposal(data); err != nil {
		return err
	}
	return m.rn.Propose(data)
}

// checkProposal judges a proposal's data, local or forwarded by a follower:
// it must decode, and must not use the key reserved for no-op entries.
func checkProposal(data []byte) error {
	r, err := controller.Decode(data)
	if err != nil {
		return err
	}
	recs := []controller.Record{r}
	if b, ok := r.Body.(controller.Batch); ok {
		recs = b.Records
	}
	for _, r := range recs {
		if s, ok := r.Body.(controller.SetConfig); ok && s.Key == noopKey {
			return fmt.Errorf("quorum: config key %q is reserved", noopKey)
		}
	}
	return nil
}

// ProposeConfChange proposes a membership change (e.g. promoting a learner).
func (m *Member) ProposeConfChange(cc raftpb.ConfChangeI) error {
	if m.err != nil {
		return m.err
	}
	return m.rn.ProposeConfChange(cc)
}

// ReportUnreachable tells raft that the last message to id was not
// delivered.
func (m *Member) ReportUnreachable(id uint64) { m.rn.ReportUnreachable(id) }

// ReportSnapshot tells raft whether the snapshot sent to id (a MsgSnap from
// Ready) arrived. The transport must call it for every MsgSnap, or the
// leader stops replicating to id.
func (m *Member) ReportSnapshot(id uint64, ok bool) {
	st := raft.SnapshotFinish
	if !ok {
		st = raft.SnapshotFailure
	}
	m.rn.ReportSnapshot(id, st)
}

// Ready runs one raft Ready cycle, if raft has one: it saves the hard state,
// the new entries and any snapshot to the Log; then restores the image from
// the snapshot, applies the committed entries, and advances raft. It returns
// the messages to send, which may be sent only now that the state they
// reflect is durable, and what it applied, in order.
//
// An error (a Log write failed, a committed entry or snapshot is corrupt)
// stops the member: its state is no longer trustworthy, and every later
// call returns the error. Nothing is returned to send.
func (m *Member) Ready() ([]raftpb.Message, []Applied, error) {
	if m.err != nil {
		return nil, nil, m.err
	}
	if !m.rn.HasReady() {
		return nil, nil, nil
	}
	rd := m.rn.Ready()
	if err := m.log.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
		return m.fail(fmt.Errorf("quorum: save: %w", err))
	}
	var out []Applied
	if !raft.IsEmptySnap(rd.Snapshot) {
		md := rd.Snapshot.Metadata
		img, bc, err := decodeImage(rd.Snapshot.Data, md.Index)
		if err != nil {
			return m.fail(err)
		}
		m.img, m.bc, m.applied, m.snapIndex = img, bc, md.Index, md.Index
		m.confState = md.ConfState
		out = append(out, Applied{Index: md.Index, Term: md.Term, Kind: KindSnapshot, Data: rd.Snapshot.Data})
	}
	for _, e := range rd.CommittedEntries {
		a, err := m.apply(e)
		if err != nil {
			return m.fail(err)
		}
		out = append(out, a)
	}
	m.rn.Advance(rd)
	return rd.Messages, out, nil
}

func (m *Member) fail(err error) ([]raftpb.Message, []Applied, error) {
	m.err = err
	return nil, nil, err
}

// apply applies one committed entry to the image.
func (m *Member) apply(e raftpb.Entry) (Applied, error) {
	if e.Index != m.applied+1 {
		return Applied{}, fmt.Errorf("quorum: entry %d applied after %d", e.Index, m.applied)
	}
	a := Applied{Index: e.Index, Term: e.Term, Data: e.Data}
	next := m.img
	var err error
	switch e.Type {
	case raftpb.EntryNormal:
		if len(e.Data) == 0 {
			a.Kind = KindEmpty
			break
		}
		a.Kind = KindRecord
		if a.Record, err = controller.Decode(e.Data); err != nil {
			// Corruption (or a record type this code cannot read): not
			// deterministic across members, so stop rather than skip.
			return Applied{}, fmt.Errorf("quorum: entry %d: %w", e.Index, err)
		}
		next, err = m.img.Apply(e.Index, a.Record)
		switch {
		case err == nil:
			m.bc.apply(a.Record)
		case errors.Is(err, controller.ErrNotApplicable):
			a.Err, next = err, m.img
		default:
			return Applied{}, fmt.Errorf("quorum: entry %d: %w", e.Index, err)
		}
	case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
		a.Kind = KindConfChange
		var cc raftpb.ConfChangeI
		if e.Type == raftpb.EntryConfChange {
			var c raftpb.ConfChange
			err, cc = c.Unmarshal(e.Data), c
		} else {
			var c raftpb.ConfChangeV2
			err, cc = c.Unmarshal(e.Data), c
		}
		if err != nil {
			return Applied{}, fmt.Errorf("quorum: entry %d: conf change: %w", e.Index, err)
		}
		m.confState = *m.rn.ApplyConfChange(cc)
	default:
		return Applied{}, fmt.Errorf("quorum: entry %d: unknown type %v", e.Index, e.Type)
	}
	if next.Version() < e.Index {
		if next, err = noop(next, e.Index); err != nil {
			return Applied{}, err
		}
	}
	m.img, m.applied = next, e.Index
	return a, nil
}

// MaybeSnapshot takes a snapshot of the image when at least every entries
// were applied since the log's latest snapshot, stores it in the Log and
// compacts the log up to CatchUpEntries below it. A member whose next entry
// was compacted away gets the snapshot from the leader (MsgSnap) and Ready
// restores its image from it. It reports whether it took a snapshot (an
// error with true means the snapshot is stored but compaction failed).
func (m *Member) MaybeSnapshot(every uint64) (bool, error) {
	if m.err != nil {
		return false, m.err
	}
	if every == 0 || m.applied < m.snapIndex+every {
		return false, nil
	}
	data, err := encodeImage(m.img, m.bc)
	if err != nil {
		return false, err
	}
	cs := m.confState
	if _, err := m.log.CreateSnapshot(m.applied, &cs, data); err != nil {
		return false, err
	}
	m.snapIndex = m.applied
	first, err := m.log.FirstIndex()
	if err != nil || m.applied < m.catchUp || m.applied-m.catchUp < first {
		return true, err
	}
	if err := m.log.Compact(m.applied - m.catchUp); err != nil {
		return true, err
	}
	return true, nil
}

// discardLogger drops raft's log output but keeps its panics.
type discardLogger struct{}

func (discardLogger) Debug(...any)            {}
func (discardLogger) Debugf(string, ...any)   {}
func (discardLogger) Error(...any)            {}
func (discardLogger) Errorf(string, ...any)   {}
func (discardLogger) Info(...any)             {}
func (discardLogger) Infof(string, ...any)    {}
func (discardLogger) Warning(...any)          {}
func (discardLogger) Warningf(string, ...any) {}
func (discardLogger) Fatal(v ...any)          { panic(fmt.Sprint(v...)) }
func (discardLogger) Fatalf(f string, v ...any) {
	panic(fmt.Sprintf(f, v...))
}
func (discardLogger) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (discardLogger) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
