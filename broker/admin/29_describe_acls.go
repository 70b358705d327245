package admin

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/controller"
)

// DescribeAcls: v0-3
//
// Behaviour:
//   - Needs DESCRIBE on the cluster (authz.go); SECURITY_DISABLED when no
//     authorizer is configured.
//   - Answered from this broker's metadata image: the bindings the filter
//     selects as Kafka's AclBindingFilter does (ANY, MATCH, a null name,
//     principal or host matching any; hosts compared in normal form,
//     acl.NormalizeHost), grouped by resource pattern, in a fixed order.
//     Hosts are shown in normal form, bindings stored before creation
//     normalised them included.
//   - A filter with an UNKNOWN (or out-of-range) field is INVALID_REQUEST.
//
// Version notes:
//   - v1: pattern type filter (KIP-290; v0 filters are LITERAL)
//   - v2: flexible; v3: nothing new
func describeAclsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 29, Client: api.Versions(0, 3), Handle: bindTo(h, handleDescribeACLs),
		Rule: api.Needs("DESCRIBE on CLUSTER", 1, api.ClusterTop(acl.OpDescribe)),
	}
}

func handleDescribeACLs(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if !h.Authorizing() {
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, strPtr("no authorizer is configured (authorizer.class.name)")
		respond(resp)
		return
	}
	f := aclFilterOf(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, strPtr(err.Error())
		respond(resp)
		return
	}
	img := h.Image()
	if img == nil {
		img = &controller.Image{}
	}
	// img.ACLs is sorted by resource type, pattern, name: one resource's
	// bindings are adjacent.
	for _, a := range img.ACLs() {
		bd := acl.FromRecord(a)
		if !f.Matches(bd) {
			continue
		}
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != kmsg.ACLResourceType(a.ResourceType) ||
			resp.Resources[n-1].ResourceName != a.Name || resp.Resources[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(a.PatternType) {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(a.ResourceType), a.Name, kmsg.ACLResourcePatternType(a.PatternType)
			resp.Resources = append(resp.Resources, r)
			n++
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = a.Principal, acl.NormalizeHost(a.Host), kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, e)
	}
	respond(resp)
}
