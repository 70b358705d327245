package coordinator

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/share"
)

// DeleteGroups: v0-3
//
// Behaviour: a group with no members is deleted with all its committed
// offsets (tombstones in the offsets topic, durable before the answer);
// a group with members is NON_EMPTY_GROUP; an unknown group
// GROUP_ID_NOT_FOUND. From v3 a failed group carries a message: Kafka's
// "Group <id> not found." for an unknown group, else the error's text.
// A share group's share-partition state goes first, as in Kafka 4.2
// (GroupCoordinatorService.deleteGroups): the group marks every
// share-partition it lists as deleting, the share coordinator deletes
// their state (DeleteShareGroupState, through ShareStates), this node's
// leaders of them drop what they hold, and only then do the group's
// records go; a state that could not be deleted is the group's error
// (such as COORDINATOR_NOT_AVAILABLE), and the group stays, marked, for
// the next attempt.
//
// Version notes: v2: flexible; v3: per-group error message
func deleteGroupsEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 42, Client: api.Versions(0, 3), Handle: bindTo(h, handleDeleteGroups),
		Rule:    api.Needs("DELETE on GROUP", 2, checkDeleteGroups),
		Mutates: true,
	}
}

func handleDeleteGroups(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	pending := len(req.Groups)
	if pending == 0 {
		respond(resp)
		return
	}
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
	done := make(chan struct{}, len(req.Groups))
	for i, id := range req.Groups {
		r := &resp.Groups[i]
		*r = kmsg.NewDeleteGroupsResponseGroup()
		r.Group = id
		if code := requestCode(h, id); code != 0 {
			r.ErrorCode = code
			done <- struct{}{}
			continue
		}
		if h.Coordinator().GroupType(id) != ShareGroupType {
			deleteGroup(h, id, r, done)
			continue
		}
		// A share group: its share-partitions' state first, then the
		// group, as Kafka orders them; the state's deletion waits on the
		// share coordinator.
		h.Go(func() {
			if code := deleteShareGroupStates(h, id); code != 0 {
				r.ErrorCode = code
				done <- struct{}{}
				return
			}
			deleteGroup(h, id, r, done)
		})
	}
	h.Go(func() {
		for range req.Groups {
			<-done
		}
		if req.Version >= 3 {
			for i := range resp.Groups {
				r := &resp.Groups[i]
				if r.ErrorCode == kerr.GroupIDNotFound.Code {
					m := fmt.Sprintf("Group %s not found.", r.Group)
					r.ErrorMessage = &m
				} else {
					r.ErrorMessage = errorMessage(r.ErrorCode)
				}
			}
		}
		respond(resp)
	})
}

// deleteGroup deletes group id, of any type, with its committed offsets
// and fills r, signalling done once the tombstones are committed or r has
// its error.
func deleteGroup(h APIHost, id string, r *kmsg.DeleteGroupsResponseGroup, done chan<- struct{}) {
	var err error
	existed := h.Coordinator().With(id, false, func(g *group.Group) []group.Reply {
		err = g.Delete()
		return nil
	})
	var wait func() error
	if !existed {
		var derr error
		existed, wait, derr = h.Coordinator().DeleteNextGen(id)
		if err == nil {
			err = derr
		}
	}
	offs := h.Coordinator().Offsets(id)
	switch {
	case err != nil:
		r.ErrorCode = group.ErrorCode(err)
	case !existed && len(offs) == 0:
		r.ErrorCode = kerr.GroupIDNotFound.Code
	}
	if r.ErrorCode != 0 {
		done <- struct{}{}
		return
	}
	tombs := make(map[TopicPartition]*Committed, len(offs))
	for tp := range offs {
		tombs[tp] = nil
	}
	if wait != nil && len(tombs) == 0 {
		h.Go(func() {
			if wait() != nil {
				r.ErrorCode = kerr.KafkaStorageError.Code
			}
			done <- struct{}{}
		})
		return
	}
	// With offsets too, their tombstones follow the group's records in
	// the log: their commit covers both.
	h.Coordinator().Commit(id, tombs, func(err error) {
		if err != nil {
			r.ErrorCode = kerr.KafkaStorageError.Code
		}
		done <- struct{}{}
	})
}

// deleteShareGroupStates is DeleteGroups' first step for share group id
// (Kafka's deleteShareGroups): the group moves every share-partition it
// lists to deleting, and the share coordinator deletes their state. It
// returns the group's error: NON_EMPTY_GROUP, or why the state could not
// be deleted (the group then stays, its marks for the next attempt); 0
// when the group's records may go, or when it went meanwhile (deleteGroup
// answers that).
func deleteShareGroupStates(h APIHost, id string) int16 {
	var parts map[share.TopicID][]int32
	code, _ := shareStep(h, id, false, func(g *share.Group, img *share.Image) ([]share.Record, error) {
		var recs []share.Record
		var err error
		parts, recs, err = g.BeginDelete(img)
		return recs, err
	})
	switch {
	case code == kerr.GroupIDNotFound.Code:
		return 0
	case code != 0:
		return code
	}
	ctx, cancel := shareContext()
	defer cancel()
	for _, err := range deleteShareStates(ctx, h, id, parts) {
		if err != nil {
			return h.Code(err)
		}
	}
	h.UnloadShareGroup(id)
	return 0
}

func checkDeleteGroups(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	keep, denied := api.SiftGroups(z, acl.OpDelete, req.Groups)
	if len(denied) > 0 {
		req.Groups = keep
	}
	return api.Partial(req, len(denied), len(keep), func(resp *kmsg.DeleteGroupsResponse) {
		for _, g := range denied {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, api.GroupDenied
			if resp.Version >= 3 {
				rg.ErrorMessage = errorMessage(rg.ErrorCode)
			}
			resp.Groups = append(resp.Groups, rg)
		}
	})
}
