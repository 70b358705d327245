package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config"
)

// ApiVersions: v0-5
//
// Behaviour:
//   - Advertises exactly the registry (registry.go): on a client listener
//     its client ranges, on the CONTROLLER listener its controller ranges
//     (the SASL keys only when that listener is SASL).
//   - A request newer than v5 is answered by the front end itself with a v0
//     response carrying UNSUPPORTED_VERSION and our ranges (KIP-511), so
//     newer clients negotiate down.
//   - v3+: client software name and version must be non-empty and made of
//     [a-zA-Z0-9._-], else INVALID_REQUEST, as Kafka checks them.
//   - v3+: supported and finalized features (KIP-584) with the image
//     version as their epoch: see broker/config/features.go for the levels and why.
//   - v5 (KIP-1242): a client that knows which broker of which cluster it
//     means to reach names both (ClusterID, NodeID); when either is not
//     this node's the answer is REBOOTSTRAP_REQUIRED with no keys, so a
//     client that a stale DNS record or a load balancer sent elsewhere
//     drops its metadata and starts again from its bootstrap servers.
//     Kafka's rule (KafkaApis): the check runs when ClusterID is set, and
//     a request naming only one of the two (ClusterID null with NodeID
//     other than -1, or the reverse) is INVALID_REQUEST, also with no keys.
//     Both unset (null, -1) is a client bootstrapping: no check. The same
//     on the CONTROLLER listener, with this node's id and cluster id.
//
// Version notes:
//   - v3: flexible, client software name/version (KIP-511), features
//     (KIP-584, tagged fields)
//   - v4: supported feature ranges may start at 0 (KIP-1022, KAFKA-17492)
//   - v5: ClusterID and NodeID in the request (KIP-1242)
func init() {
	register(func(b *Broker) api.Entry {
		return api.Entry{
			Key: 18, Client: api.Versions(0, 5), Handle: bind(b, handleApiVersions),
			Controller: api.Versions(0, 5),
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
	if code := addressedTo(req, b.clusterID, b.cfg.NodeID); code != 0 {
		resp.ErrorCode = code // no keys: the client must not use this connection
		respond(resp)
		return
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

// addressedTo checks KIP-1242's ClusterID and NodeID (v5+) against this
// node: 0 when they are unset or match, REBOOTSTRAP_REQUIRED when a set
// pair names another node or cluster, INVALID_REQUEST when only one of
// them is set.
func addressedTo(req *kmsg.ApiVersionsRequest, clusterID string, nodeID int32) int16 {
	if req.Version < 5 {
		return 0
	}
	switch {
	case req.ClusterID == nil && req.NodeID == -1:
		return 0
	case req.ClusterID == nil || req.NodeID == -1:
		return kerr.InvalidRequest.Code
	case *req.ClusterID != clusterID || req.NodeID != nodeID:
		return kerr.RebootstrapRequired.Code
	}
	return 0
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
