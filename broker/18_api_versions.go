package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config"
)

// ApiVersions: v0-4
//
// Behaviour:
//   - Advertises exactly the registry (registry.go): on a client listener
//     its client ranges, on the CONTROLLER listener its controller ranges
//     (the SASL keys only when that listener is SASL).
//   - A request newer than v4 is answered by the front end itself with a v0
//     response carrying UNSUPPORTED_VERSION and our ranges (KIP-511), so
//     newer clients negotiate down.
//   - v3+: client software name and version must be non-empty and made of
//     [a-zA-Z0-9._-], else INVALID_REQUEST, as Kafka checks them.
//   - v3+: supported and finalized features (KIP-584) with the image
//     version as their epoch: see broker/config/features.go for the levels and why.
//
// Version notes:
//   - v3: flexible, client software name/version (KIP-511), features
//     (KIP-584, tagged fields)
//   - v4: supported feature ranges may start at 0 (KIP-1022, KAFKA-17492)
func init() {
	register(func(b *Broker) api.Entry {
		return api.Entry{
			Key: 18, Client: api.Versions(0, 4), Handle: bind(b, handleApiVersions),
			Controller: api.Versions(0, 4),
			CtlLocal:   true,
			Rule:       api.Needs("none", 0, api.NoACL),
		}
	})
}

func handleApiVersions(b *Broker, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!validSoftware(req.ClientSoftwareName) || !validSoftware(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	if cc.Listener == api.CtlListener {
		// The CONTROLLER listener's own table; controllers finalize no
		// features of their own there.
		resp.ApiKeys = b.reg.ControllerTable(b.ctlSASLServer != nil).All()
		resp.FinalizedFeaturesEpoch = -1
		respond(resp)
		return
	}
	resp.ApiKeys = b.reg.ClientTable().All()
	config.FillFeatures(resp, req.Version, int64(b.image().Version()))
	respond(resp)
}

func validSoftware(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
