package active

import (
	"context"

	"github.com/fjordlog/fjord/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createACLs decides a CreateAcls forwarded by a broker, which has already
// answered the invalid creations itself (broker/acl.Binding.Validate) and
// forwards only the valid ones, or sent to the CONTROLLER listener by an
// admin client (KIP-919), which no broker has checked: each creation is
// checked and normalised by cfg.ACLBinding, and the valid ones are
// proposed as one batch. One that is not concrete (or fails ACLBinding)
// is INVALID_REQUEST.
func (c *Controller) createACLs(ctx context.Context, req *kmsg.CreateACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	var recs []controller.Record
	for i, cr := range req.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		a := controller.ACL{ResourceType: int8(cr.ResourceType), Name: cr.ResourceName, PatternType: int8(cr.ResourcePatternType),
			Principal: cr.Principal, Host: cr.Host, Operation: int8(cr.Operation), Permission: int8(cr.PermissionType)}
		if !a.Concrete() {
			resp.Results[i].ErrorCode = kerr.InvalidRequest.Code
			continue
		}
		if c.cfg.ACLBinding != nil {
			n, err := c.cfg.ACLBinding(a)
			if err != nil {
				msg := err.Error()
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, &msg
				continue
			}
			a = n
		}
		recs = append(recs, controller.NewRecord(controller.ACLChange{ACL: a}))
	}
	if _, err := c.propose(ctx, recs); err != nil {
		for i := range resp.Results {
			if resp.Results[i].ErrorCode == 0 {
				resp.Results[i].ErrorCode = proposeCode(err)
			}
		}
		return resp
	}
	if len(recs) > 0 {
		c.log.Info().Int("acls", len(recs)).Msg("acls created")
	}
	return resp
}

// deleteACLs decides a DeleteAcls forwarded by a broker (valid filters
// only): each filter matches the image's bindings as Kafka's
// AclBindingFilter does, hosts compared in cfg.ACLHost's normal form, a
// binding two filters match is reported (and removed) under the first,
// and the removals are one batch.
func (c *Controller) deleteACLs(ctx context.Context, img *controller.Image, req *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	all := img.ACLs()
	taken := map[controller.ACL]bool{}
	var recs []controller.Record
	for _, f := range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		cf := controller.ACLFilter{ResourceType: int8(f.ResourceType), Name: f.ResourceName, PatternType: int8(f.ResourcePatternType),
			Principal: f.Principal, Host: f.Host, Operation: int8(f.Operation), Permission: int8(f.PermissionType), NormalizeHost: c.cfg.ACLHost}
		for _, a := range all {
			if taken[a] || !cf.Matches(a) {
				continue
			}
			taken[a] = true
			recs = append(recs, controller.NewRecord(controller.ACLChange{ACL: a, Remove: true}))
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(a.ResourceType), a.Name, kmsg.ACLResourcePatternType(a.PatternType)
			m.Principal, m.Host = a.Principal, a.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
			r.MatchingACLs = append(r.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, r)
	}
	if _, err := c.propose(ctx, recs); err != nil {
		code := proposeCode(err)
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].MatchingACLs = code, nil
		}
		return resp
	}
	if len(recs) > 0 {
		c.log.Info().Int("acls", len(recs)).Msg("acls deleted")
	}
	return resp
}
