package admin

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// CreateAcls: v0-3
//
// Behaviour:
//   - Needs ALTER on the cluster (authz.go); SECURITY_DISABLED for every
//     creation when no authorizer is configured (authorizer.class.name).
//   - Each creation is checked here as Kafka checks it: a concrete
//     resource type, pattern LITERAL or PREFIXED (MATCH and ANY are for
//     filters), a concrete operation and permission, a non-empty name
//     (kafka-cluster for CLUSTER), a Type:name principal and a "*" or IP
//     host; anything else is INVALID_REQUEST with a message for that
//     creation alone. Kafka's controller accepts any host string; one that
//     is not an IP address can never match a connection, so Fjord refuses
//     it rather than store an ACL that silently does nothing.
//   - The host is stored in normal form (acl.NormalizeHost: IPv4-mapped
//     IPv6 as IPv4, lower case, zeros compressed), so a DENY written as
//     "::ffff:10.0.0.5" or "2001:DB8:0:0::1" applies to the connection it
//     names; DescribeAcls shows that form. The active controller checks
//     and normalises the same way what reaches it on the CONTROLLER
//     listener (active.Config.ACLBinding).
//   - The valid ones are forwarded to the active controller, which commits
//     them to the metadata log as ACL records (type 15); the answer comes
//     once this broker's image shows them, so a DescribeAcls that follows
//     on the same broker sees them. Creating a binding that exists
//     succeeds and changes nothing.
//
// Version notes:
//   - v1: pattern type (KIP-290; v0 creations are LITERAL)
//   - v2: flexible
//   - v3: nothing new (KIP-679's idempotent-write default)
func createAclsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 30, Client: api.Versions(0, 3), Handle: bindTo(h, handleCreateACLs),
		Controller:    api.Versions(0, 3),
		Rule:          api.Needs("ALTER on CLUSTER", 5, api.WholeDenied(acl.OpAlter, errorCreateACLs)),
		Mutates:       true,
		AuditDetails:  auditCreateACLs,
		ErrorResponse: errorCreateACLs,
	}
}

func handleCreateACLs(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	if !h.Authorizing() {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.SecurityDisabled.Code, strPtr("no authorizer is configured (authorizer.class.name)")
		}
		respond(resp)
		return
	}
	fwd := *req
	fwd.Creations = nil
	var idx []int
	for i, c := range req.Creations {
		if req.Version == 0 {
			c.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		bd, err := acl.Stored(acl.Binding{ResourceType: acl.ResourceType(c.ResourceType), Name: c.ResourceName, Pattern: acl.PatternType(c.ResourcePatternType),
			Principal: c.Principal, Host: c.Host, Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType)})
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, strPtr(err.Error())
			continue
		}
		c.Host = bd.Host
		fwd.Creations = append(fwd.Creations, c)
		idx = append(idx, i)
	}
	if len(fwd.Creations) == 0 {
		respond(resp)
		return
	}
	f := api.Scattering(resp, resp.Results, idx, func(r *kmsg.CreateACLsResponse) []kmsg.CreateACLsResponseResult { return r.Results })
	f.WaitMax = api.UntimedWait
	api.Forward(h, cc, &fwd, f, respond)
}

func strPtr(s string) *string { return &s }

// aclFilterOf converts a wire filter (DescribeAcls, one of DeleteAcls) to
// acl's, v0 filters being LITERAL as Kafka reads them.
func aclFilterOf(version int16, rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl.Filter {
	if version == 0 {
		pt = kmsg.ACLResourcePatternTypeLiteral
	}
	return acl.Filter{ResourceType: acl.ResourceType(rt), Name: name, Pattern: acl.PatternType(pt), Principal: principal,
		Host: host, Operation: acl.Operation(op), Permission: acl.Permission(perm)}
}

func errorCreateACLs(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.CreateACLsRequest)
	r := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		sr := kmsg.NewCreateACLsResponseResult()
		sr.ErrorCode = code
		r.Results = append(r.Results, sr)
	}
	return r
}

// auditCreateACLs names each binding in full: who gets (or is denied)
// which operation on what, from where.
func auditCreateACLs(kreq kmsg.Request) []string {
	req := kreq.(*kmsg.CreateACLsRequest)
	out := make([]string, 0, len(req.Creations))
	for _, c := range req.Creations {
		out = append(out, fmt.Sprintf("%s %s %s on %s:%s (%s) from host %s", c.Principal, c.PermissionType, c.Operation,
			c.ResourceType, c.ResourceName, c.ResourcePatternType, c.Host))
	}
	return out
}
