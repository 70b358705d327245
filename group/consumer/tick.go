package consumer

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/fjordlog/fjord/group"
)

// Tick removes the members whose session expired (no successful heartbeat
// for Config.SessionTimeoutMs) or who did not revoke their partitions
// within their rebalance timeout, at deadlines <= now, earliest first, each
// with its own epoch bump, as Kafka's timers would. It returns the records
// to persist. Before Loaded, a replayed group has no deadlines: call
// Loaded first.
func (g *Group) Tick(now int64, img *Image) []Record {
	if g.dead {
		return nil
	}
	type expiry struct {
		at int64
		id string
	}
	var due []expiry
	for _, m := range g.members {
		switch {
		case m.sessionDeadline <= now:
			due = append(due, expiry{m.sessionDeadline, m.id})
		case m.joinDeadline >= 0 && m.joinDeadline <= now:
			due = append(due, expiry{m.joinDeadline, m.id})
		case m.syncDeadline >= 0 && m.syncDeadline <= now:
			due = append(due, expiry{m.syncDeadline, m.id})
		case m.rebalanceDeadline >= 0 && m.rebalanceDeadline <= now:
			if m.cur.epoch == m.rebalanceEpoch {
				due = append(due, expiry{m.rebalanceDeadline, m.id})
			} else {
				// The member left that epoch: the timeout no longer
				// applies (Kafka's timer finds another epoch).
				m.rebalanceDeadline = -1
			}
		}
	}
	slices.SortFunc(due, func(a, b expiry) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id))
	})
	for _, e := range due {
		if g.dead || g.members[e.id] == nil {
			break // downgraded to a classic group: the rest is its business
		}
		g.fence(now, e.id, img)
	}
	return g.flush()
}

// MetadataChanged re-resolves the group's regular expressions against img
// and checks whether the topics its members subscribe to changed (created,
// deleted, more partitions); if so it bumps the group epoch, so that the
// next heartbeat computes a new target assignment. The coordinator calls
// it for every group whenever its metadata image changes topics, and once
// after Loaded. It returns the records to persist.
//
// may is the DESCRIBE of the principal whose heartbeat brings the change
// (see Visibility), AllTopics without an authorizer; nil when nobody's
// heartbeat does (a timeout, a describe, a load): the expressions then
// keep their resolutions until a heartbeat resolves them again, as
// Kafka refreshes them only in a member's heartbeat.
func (g *Group) MetadataChanged(now int64, img *Image, may Visibility) []Record {
	if !g.exists() {
		return nil
	}
	subscribed := map[string]bool{}
	for _, m := range g.members {
		if re := m.meta.regexOrEmpty(); re != "" {
			subscribed[re] = true
		}
	}
	changed := false
	for _, re := range slices.Sorted(maps.Keys(g.regexes)) {
		if !subscribed[re] {
			// Left by a coordinator that resolved asynchronously.
			g.emit(regexRec{regex: re, tomb: true})
			changed = true
		}
	}
	for _, re := range slices.Sorted(maps.Keys(subscribed)) {
		if may == nil {
			break // nobody to resolve them for
		}
		old, ok := g.regexes[re]
		r := g.resolve(re, img, now, may)
		if !ok || !slices.Equal(old.topics, r.topics) {
			g.emit(regexRec{regex: re, r: r})
			changed = true
		}
	}
	if hash := img.MetadataHash(g.groupTopics()); changed || hash != g.metadataHash {
		g.bumpEpoch(hash)
	}
	return g.flush()
}

// Replay applies one stored record, in log order, to a group being loaded
// (a group from New, fed every record GroupOfKey attributes to its id).
// Tombstones of absent members or expressions are ignored; a record
// inconsistent with the group so far is an error, and the record is not
// applied. Once the log is read, call Loaded. A group that ends Dead was
// deleted: drop it.
func (g *Group) Replay(key, value []byte) error {
	id, rec, err := decode(key, value)
	if err != nil {
		return err
	}
	if id != g.id {
		return fmt.Errorf("consumer: record of group %q replayed into group %q", id, g.id)
	}
	if err := rec.apply(g); err != nil {
		return fmt.Errorf("consumer: group %q: %w", g.id, err)
	}
	return nil
}

// Loaded finishes a load: every member's session starts at now, and the
// rebalance timeout of every member with partitions to revoke, as Kafka's
// onLoaded. The coordinator should then call MetadataChanged with its
// current image.
func (g *Group) Loaded(now int64) {
	for _, m := range g.members {
		m.sessionDeadline = now + g.sessionTimeout(m)
		m.rebalanceDeadline, m.joinDeadline, m.syncDeadline = -1, -1, -1
		// Kafka arms it for every member in memberUnrevoked, even a static
		// member that left (epoch -2), whose timer then fences it; only
		// members that have something to revoke get one here. A classic
		// member has none: its session and its next join bound it.
		if len(m.cur.revoking) > 0 && m.meta.classic == nil {
			m.rebalanceDeadline = now + int64(m.meta.rebalanceTimeoutMs)
			m.rebalanceEpoch = m.cur.epoch
		}
	}
}

// Delete deletes an Empty group (DeleteGroups, or offsets expiring): it
// returns tombstones for every record the group has, and the group is
// Dead. It fails with group.ErrNonEmptyGroup while the group has members
// and group.ErrGroupNotFound if it does not exist.
func (g *Group) Delete() ([]Record, error) {
	switch {
	case !g.exists():
		return nil, errf(group.ErrGroupNotFound, "Group %s not found.", g.id)
	case len(g.members) > 0:
		return nil, errf(group.ErrNonEmptyGroup, "The group is not empty.")
	}
	for _, id := range slices.Sorted(maps.Keys(g.target)) {
		g.emit(targetMemberRec{id: id, tomb: true})
	}
	g.emit(targetEpochRec{tomb: true})
	for _, re := range slices.Sorted(maps.Keys(g.regexes)) {
		g.emit(regexRec{regex: re, tomb: true})
	}
	if g.partitionMeta {
		g.emit(partitionMetaRec{tomb: true})
	}
	g.emit(groupRec{tomb: true})
	return g.flush(), nil
}
