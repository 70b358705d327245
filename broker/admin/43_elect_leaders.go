package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// ElectLeaders: v0-2
//
// Behaviour:
//   - Forwarded to the active controller. Preferred elections (type 0)
//     move each named partition's leadership to its first replica when that
//     broker is live and in the ISR: ELECTION_NOT_NEEDED if it leads
//     already, PREFERRED_LEADER_NOT_AVAILABLE if it is fenced or out of
//     sync. Null topics means every partition.
//   - Unclean elections (type 1) are refused: Fjord never makes an
//     out-of-sync replica leader (ELIGIBLE_LEADERS_NOT_AVAILABLE, or
//     ELECTION_NOT_NEEDED where a leader exists).
//   - The answer comes once this broker's own image shows the elections.
//
// Version notes:
//   - v1: election type, top-level error; v2: flexible
func electLeadersEntry(h Host) api.Entry {
	return api.Entry{
		Key: 43, Client: api.Versions(0, 2), Handle: bindTo(h, handleElectLeaders),
		Controller:    api.Versions(0, 2),
		Rule:          api.Needs("ALTER on CLUSTER", 4, api.ClusterTop(acl.OpAlter)),
		Mutates:       true,
		ErrorResponse: api.TopErrorResponse,
	}
}

func handleElectLeaders(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	api.Forward(h, cc, req, api.Forwarding[*kmsg.ElectLeadersResponse]{TimeoutMs: req.TimeoutMillis}, respond)
}
