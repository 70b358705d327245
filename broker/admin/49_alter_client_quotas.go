package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// AlterClientQuotas: v0-1
//
// Behaviour:
//   - Forwarded to the active controller, which checks each entry on its
//     own and commits the valid ones to the metadata log as ClientQuota
//     records (KIP-546); every broker enforces them as its image changes,
//     with no restart. The answer comes once this broker's own image shows
//     the changes.
//   - Entities: user, client-id, (user, client-id), each named or the
//     default (a null name); or ip, alone. Keys: producer_byte_rate,
//     consumer_byte_rate, request_percentage, controller_mutation_rate for
//     user and client-id entities, connection_creation_rate for ip.
//   - Per entry, as Kafka's controller: an empty, duplicated, unknown or
//     mixed-with-ip entity type, a bad ip address, an unknown key (SCRAM
//     credentials included: that is AlterUserScramCredentials), a key twice,
//     a value not above 0, or a fractional value of a whole-number key is
//     INVALID_REQUEST with a message, and nothing of that entry changes.
//     Removing a key that is not set succeeds.
//   - ValidateOnly checks everything and changes nothing.
//
// Version notes:
//   - v1: flexible
func alterClientQuotasEntry(h Host) api.Entry {
	return api.Entry{
		Key: 49, Client: api.Versions(0, 1), Handle: bindTo(h, handleAlterClientQuotas),
		Controller:    api.Versions(0, 1),
		Rule:          api.Needs("ALTER_CONFIGS on CLUSTER", 4, checkAlterClientQuotas),
		Mutates:       true,
		ErrorResponse: errorAlterClientQuotas,
	}
}

func handleAlterClientQuotas(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	api.Forward(h, cc, req, api.Forwarding[*kmsg.AlterClientQuotasResponse]{WaitMax: api.UntimedWait,
		Complete: func(resp *kmsg.AlterClientQuotasResponse) bool { return len(resp.Entries) == len(req.Entries) }}, respond)
}

func checkAlterClientQuotas(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	if z.Cluster(acl.OpAlterConfigs) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		se := kmsg.NewAlterClientQuotasResponseEntry()
		se.ErrorCode = api.ClusterDenied
		for _, p := range e.Entity {
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = p.Type, p.Name
			se.Entity = append(se.Entity, re)
		}
		resp.Entries = append(resp.Entries, se)
	}
	return resp, nil
}

func errorAlterClientQuotas(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	r := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		se := kmsg.NewAlterClientQuotasResponseEntry()
		se.ErrorCode = code
		for _, p := range e.Entity {
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = p.Type, p.Name
			se.Entity = append(se.Entity, re)
		}
		r.Entries = append(r.Entries, se)
	}
	return r
}
