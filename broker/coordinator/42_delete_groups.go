package coordinator

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group"
)

// DeleteGroups: v0-3
//
// Behaviour: a group with no members is deleted with all its committed
// offsets (tombstones in the offsets topic, durable before the answer);
// a group with members is NON_EMPTY_GROUP; an unknown group
// GROUP_ID_NOT_FOUND. From v3 a failed group carries a message: Kafka's
// "Group <id> not found." for an unknown group, else the error's text.
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
			continue
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
			continue
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
