package admin

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// DeleteAcls: v0-3
//
// Behaviour:
//   - Needs ALTER on the cluster (authz.go); SECURITY_DISABLED for every
//     filter when no authorizer is configured.
//   - A filter with an UNKNOWN (or out-of-range) field is INVALID_REQUEST
//     for that filter alone; the valid filters are forwarded to the active
//     controller, which removes every binding they select (Kafka's
//     AclBindingFilter: ANY, MATCH, null fields match any; hosts compared
//     in normal form, acl.NormalizeHost, so a binding stored before hosts
//     were normalised is selected by either form) in one batch and
//     reports each under the first filter that selected it. The answer
//     comes once this broker's image no longer shows them.
//
// Version notes:
//   - v1: pattern type filter (KIP-290; v0 filters are LITERAL)
//   - v2: flexible; v3: nothing new
func deleteAclsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 31, Client: api.Versions(0, 3), Handle: bindTo(h, handleDeleteACLs),
		Controller:    api.Versions(0, 3),
		Rule:          api.Needs("ALTER on CLUSTER", 5, api.WholeDenied(acl.OpAlter, errorDeleteACLs)),
		Mutates:       true,
		AuditDetails:  auditDeleteACLs,
		ErrorResponse: errorDeleteACLs,
	}
}

func handleDeleteACLs(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	if !h.Authorizing() {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.SecurityDisabled.Code, strPtr("no authorizer is configured (authorizer.class.name)")
		}
		respond(resp)
		return
	}
	fwd := *req
	fwd.Filters = nil
	var idx []int
	for i, f := range req.Filters {
		af := aclFilterOf(req.Version, f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType)
		if err := af.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, strPtr(err.Error())
			continue
		}
		f.ResourcePatternType = kmsg.ACLResourcePatternType(af.Pattern)
		fwd.Filters = append(fwd.Filters, f)
		idx = append(idx, i)
	}
	if len(fwd.Filters) == 0 {
		respond(resp)
		return
	}
	f := api.Scattering(resp, resp.Results, idx, func(r *kmsg.DeleteACLsResponse) []kmsg.DeleteACLsResponseResult { return r.Results })
	f.WaitMax = api.UntimedWait
	api.Forward(h, cc, &fwd, f, respond)
}

func errorDeleteACLs(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.DeleteACLsRequest)
	r := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		sr := kmsg.NewDeleteACLsResponseResult()
		sr.ErrorCode = code
		r.Results = append(r.Results, sr)
	}
	return r
}

// auditDeleteACLs names each filter in full ("*" for a field it leaves
// open).
func auditDeleteACLs(kreq kmsg.Request) []string {
	req := kreq.(*kmsg.DeleteACLsRequest)
	or := func(p *string) string {
		if p == nil {
			return "*"
		}
		return *p
	}
	out := make([]string, 0, len(req.Filters))
	for _, f := range req.Filters {
		out = append(out, fmt.Sprintf("%s %s %s on %s:%s (%s) from host %s", or(f.Principal), f.PermissionType, f.Operation,
			f.ResourceType, or(f.ResourceName), f.ResourcePatternType, or(f.Host)))
	}
	return out
}
