package sharefetch

import (
	"context"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Share sessions, as Kafka 4.2's ShareSessionCache keeps them: one per
// (group, member) on each node, opened by a ShareFetch with epoch 0 (full:
// the request's partitions are the session's), grown and shrunk by
// ShareFetches with the session's epoch (incremental: the request's
// partitions are added, ForgottenTopicsData removed, every partition of
// the session is fetched), closed by epoch -1 (final: acknowledgements
// only, then the member's records here are released) or when the
// connection that opened it closes. Every ShareFetch or ShareAcknowledge
// with a positive epoch must carry the session's epoch, which each one
// then advances (wrapping to 1 after MaxInt32).
//
// Errors, as Kafka: a positive or final epoch without a session is
// SHARE_SESSION_NOT_FOUND; a positive epoch other than the session's, or
// a ShareAcknowledge with epoch 0, INVALID_SHARE_SESSION_EPOCH; an epoch 0
// ShareFetch carrying acknowledgements INVALID_REQUEST; an epoch 0 with
// group.share.max.share.sessions sessions open SHARE_SESSION_LIMIT_REACHED.
// All of it runs on the connection's reader goroutine, in request order,
// under Manager.mu: no I/O.

// sessionKey names a session.
type sessionKey struct{ group, member string }

// tp is a topic id and partition.
type tp struct {
	id [16]byte
	p  int32
}

// session is one member's share session here.
//
// Invariants (under Manager.mu): epoch >= 1 is the epoch the member's
// next incremental request carries; parts holds no partition twice, and
// index holds exactly the partitions of parts.
type session struct {
	key   sessionKey
	epoch int32
	parts []sessionPart
	index map[tp]struct{} // the partitions of parts
	// stop ends the watch on the connection that opened the session; nil
	// when there is none.
	stop func() bool
}

// sessionPart is one partition of a session. requiresUpdate: an
// incremental response must include it even without records (it was just
// added, or its last answer was an error), as Kafka's
// CachedSharePartition.
type sessionPart struct {
	tp
	requiresUpdate bool
}

var (
	errSessionNotFound = fmt.Errorf("sharefetch: no such share session: %w", kerr.ShareSessionNotFound)
	errSessionEpoch    = fmt.Errorf("sharefetch: share session epoch: %w", kerr.InvalidShareSessionEpoch)
	errSessionLimit    = fmt.Errorf("sharefetch: share session limit: %w", kerr.ShareSessionLimitReached)
)

// nextEpoch follows epoch.
func nextEpoch(epoch int32) int32 {
	if epoch == math.MaxInt32 {
		return 1
	}
	return epoch + 1
}

// openSession opens key's session with parts (replacing the one it had,
// whose records stay acquired: the member may still acknowledge them),
// watching conn to close it when the connection closes. It returns the
// session and its partitions.
func (m *Manager) openSession(key sessionKey, parts []tp, conn context.Context) (*session, []sessionPart, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, nil, errClosed
	}
	if old := m.mu.sessions[key]; old != nil {
		m.removeSessionLocked(old)
	}
	if len(m.mu.sessions) >= m.cfg.MaxSessions {
		return nil, nil, fmt.Errorf("%w: %d sessions open", errSessionLimit, len(m.mu.sessions))
	}
	ss := &session{key: key, epoch: 1}
	ss.add(parts, false)
	m.mu.sessions[key] = ss
	m.mu.groupSessions[key.group]++
	if conn != nil && conn.Done() != nil {
		ss.stop = context.AfterFunc(conn, func() { m.connectionClosed(ss) })
	}
	return ss, ss.copyParts(), nil
}

// updateSession applies an incremental ShareFetch with epoch: parts added,
// forget removed, the epoch advanced. It returns the session and its
// partitions as they now are.
func (m *Manager) updateSession(key sessionKey, epoch int32, parts, forget []tp) (*session, []sessionPart, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ss := m.mu.sessions[key]
	switch {
	case ss == nil:
		return nil, nil, errSessionNotFound
	case ss.epoch != epoch:
		return nil, nil, fmt.Errorf("%w: got %d, want %d", errSessionEpoch, epoch, ss.epoch)
	}
	ss.add(parts, true)
	ss.remove(forget)
	ss.epoch = nextEpoch(ss.epoch)
	return ss, ss.copyParts(), nil
}

// finalSession checks that a final request (epoch -1) has a session to
// close.
func (m *Manager) finalSession(key sessionKey) (*session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ss := m.mu.sessions[key]
	if ss == nil {
		return nil, errSessionNotFound
	}
	return ss, nil
}

// ackSession checks a ShareAcknowledge's epoch against key's session and
// advances it (a final one leaves it for closeSession).
func (m *Manager) ackSession(key sessionKey, epoch int32) (*session, error) {
	if epoch == 0 {
		return nil, fmt.Errorf("%w: a ShareAcknowledge cannot open a session", errSessionEpoch)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ss := m.mu.sessions[key]
	switch {
	case ss == nil:
		return nil, errSessionNotFound
	case epoch == -1:
		return ss, nil
	case ss.epoch != epoch:
		return nil, fmt.Errorf("%w: got %d, want %d", errSessionEpoch, epoch, ss.epoch)
	}
	ss.epoch = nextEpoch(ss.epoch)
	return ss, nil
}

// current reports whether ss is still key's session at epoch: no other
// request has replaced or advanced it since.
func (m *Manager) current(ss *session, epoch int32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.sessions[ss.key] == ss && ss.epoch == epoch
}

// answered records which of the session's partitions a response at epoch
// included, with their error codes: an error makes the next incremental
// response include the partition again; any answer clears that.
func (m *Manager) answered(ss *session, epoch int32, codes map[tp]int16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.sessions[ss.key] != ss || ss.epoch != epoch {
		return
	}
	for i := range ss.parts {
		if code, ok := codes[ss.parts[i].tp]; ok {
			ss.parts[i].requiresUpdate = code != 0
		}
	}
}

// closeSession closes ss (if it is still key's) and releases the member's
// records here, waiting for their writes.
func (m *Manager) closeSession(ss *session) {
	m.mu.Lock()
	if m.mu.sessions[ss.key] == ss {
		m.removeSessionLocked(ss)
	}
	m.mu.Unlock()
	m.release(ss.key.group, ss.key.member, true)
}

// connectionClosed is the end of the connection that opened ss: as in
// Kafka, the session goes and the member's records here are released.
// It runs on a goroutine of context.AfterFunc's, which hands the work to
// one of the node's at once.
func (m *Manager) connectionClosed(ss *session) {
	m.mu.Lock()
	mine := m.mu.sessions[ss.key] == ss
	if mine {
		m.removeSessionLocked(ss)
	}
	m.mu.Unlock()
	if mine {
		m.host.Go(func() { m.release(ss.key.group, ss.key.member, false) })
	}
}

// removeSessionLocked forgets ss.
// REQUIRES: m.mu held; ss is m.mu.sessions[ss.key].
func (m *Manager) removeSessionLocked(ss *session) {
	delete(m.mu.sessions, ss.key)
	if n := m.mu.groupSessions[ss.key.group] - 1; n > 0 {
		m.mu.groupSessions[ss.key.group] = n
	} else {
		delete(m.mu.groupSessions, ss.key.group)
	}
	if ss.stop != nil {
		ss.stop()
	}
}

// add appends the partitions ss lacks.
func (ss *session) add(parts []tp, requiresUpdate bool) {
	if ss.index == nil {
		ss.index = make(map[tp]struct{}, len(parts))
	}
	for _, t := range parts {
		if _, ok := ss.index[t]; !ok {
			ss.index[t] = struct{}{}
			ss.parts = append(ss.parts, sessionPart{tp: t, requiresUpdate: requiresUpdate})
		}
	}
}

// remove drops parts from ss, keeping the order of the rest.
func (ss *session) remove(parts []tp) {
	gone := 0
	for _, t := range parts {
		if _, ok := ss.index[t]; ok {
			delete(ss.index, t)
			gone++
		}
	}
	if gone == 0 {
		return
	}
	kept := ss.parts[:0]
	for _, p := range ss.parts {
		if _, ok := ss.index[p.tp]; ok {
			kept = append(kept, p)
		}
	}
	clear(ss.parts[len(kept):])
	ss.parts = kept
}

func (ss *session) copyParts() []sessionPart {
	return append([]sessionPart(nil), ss.parts...)
}
