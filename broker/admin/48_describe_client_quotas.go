package admin

import (
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/controller"
)

// DescribeClientQuotas: v0-1
//
// Behaviour:
//   - Answered by any broker from its metadata image (KIP-546), with
//     Kafka's filter semantics: each component names an entity type and
//     match type 0 (exactly that name), 1 (the type's default entity) or 2
//     (any entity of the type, default included); an entity matches when
//     it has every component's type as asked. Strict also requires the
//     entity to have no other type; an empty filter without strict matches
//     every entity. Only entities with a quota are listed, with all their
//     keys.
//   - A type given twice, an exact match without a name, a name with match
//     types 1 or 2, an unknown match type, or ip combined with user or
//     client-id is INVALID_REQUEST; an entity type other than user,
//     client-id and ip is UNSUPPORTED_VERSION (Kafka's "custom entity type").
//
// Version notes:
//   - v1: flexible
func describeClientQuotasEntry(h Host) api.Entry {
	return api.Entry{
		Key: 48, Client: api.Versions(0, 1), Handle: bindTo(h, handleDescribeClientQuotas),
		Rule: api.Needs("DESCRIBE_CONFIGS on CLUSTER", 0, api.ClusterTop(acl.OpDescribeConfigs)),
	}
}

func handleDescribeClientQuotas(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	img := h.LatestImage()
	f, code, err := quotaFilterOf(req)
	if err != nil {
		resp.ErrorCode = code
		m := err.Error()
		resp.ErrorMessage = &m
		respond(resp)
		return
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{} // none matched is an empty list, not null
	for _, e := range img.QuotaEntities() {
		if !f.matches(e) {
			continue
		}
		se := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range e.Parts() {
			sp := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			sp.Type, sp.Name = p.Type, p.Name
			se.Entity = append(se.Entity, sp)
		}
		q := img.ClientQuotas(e)
		for _, k := range slices.Sorted(maps.Keys(q)) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q[k]
			se.Values = append(se.Values, v)
		}
		resp.Entries = append(resp.Entries, se)
	}
	respond(resp)
}

// quotaFilter is a checked DescribeClientQuotas filter: per entity type,
// whether it is asked for, and if so the name it must have (exact) or its
// default (def), or any entity of the type.
type quotaFilter struct {
	strict bool
	parts  map[string]quotaMatch
}

type quotaMatch struct {
	any  bool
	name controller.QuotaName // when !any: Named(...) or DefaultName()
}

func quotaFilterOf(req *kmsg.DescribeClientQuotasRequest) (quotaFilter, int16, error) {
	f := quotaFilter{strict: req.Strict, parts: map[string]quotaMatch{}}
	for _, c := range req.Components {
		switch c.EntityType {
		case controller.QuotaUser, controller.QuotaClientID, controller.QuotaIP:
		default:
			return f, kerr.UnsupportedVersion.Code, fmt.Errorf("custom entity type %q not supported", c.EntityType)
		}
		if _, dup := f.parts[c.EntityType]; dup {
			return f, kerr.InvalidRequest.Code, fmt.Errorf("entity type %q appears more than once in the filter", c.EntityType)
		}
		switch c.MatchType {
		case 0:
			if c.Match == nil {
				return f, kerr.InvalidRequest.Code, fmt.Errorf("match type exact (0) for %q without a name", c.EntityType)
			}
			f.parts[c.EntityType] = quotaMatch{name: controller.Named(*c.Match)}
		case 1, 2:
			if c.Match != nil {
				return f, kerr.InvalidRequest.Code, fmt.Errorf("match type %d for %q with a name", c.MatchType, c.EntityType)
			}
			f.parts[c.EntityType] = quotaMatch{any: c.MatchType == 2, name: controller.DefaultName()}
		default:
			return f, kerr.InvalidRequest.Code, fmt.Errorf("unknown match type %d", c.MatchType)
		}
	}
	_, ip := f.parts[controller.QuotaIP]
	if ip && len(f.parts) > 1 {
		return f, kerr.InvalidRequest.Code, fmt.Errorf("an ip filter component cannot be combined with user or client-id")
	}
	return f, 0, nil
}

func (f quotaFilter) matches(e controller.QuotaEntity) bool {
	have := map[string]controller.QuotaName{}
	for typ, n := range map[string]controller.QuotaName{controller.QuotaUser: e.User, controller.QuotaClientID: e.ClientID, controller.QuotaIP: e.IP} {
		if n.Set {
			have[typ] = n
		}
	}
	if f.strict && len(have) != len(f.parts) {
		return false
	}
	for typ, m := range f.parts {
		n, ok := have[typ]
		if !ok || (!m.any && n != m.name) {
			return false
		}
	}
	return true
}
