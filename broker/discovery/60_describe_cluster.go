package discovery

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// DescribeCluster: v0-2
//
// Behaviour:
//   - Answered from this broker's image: cluster id, the active controller
//     (its node id if it is a live broker, else this broker's), and
//     the brokers at their address on the listener the request came in on —
//     the unfenced ones, plus the fenced ones when v2 asks for them.
//   - EndpointType (KIP-919) 1, brokers, is what a broker describes. A
//     broker asked for 2 (controllers) answers MISMATCHED_ENDPOINT_TYPE, as
//     Kafka's brokers do: controllers are described by the controllers
//     themselves, on their CONTROLLER listener (bootstrap.controllers). Any
//     other type is UNSUPPORTED_ENDPOINT_TYPE. The response echoes the type
//     served (1).
//   - ClusterAuthorizedOperations (KIP-430): when asked, the operations the
//     principal may perform on the cluster, from the authorizer (0 without
//     DESCRIBE on it, as Kafka); -2147483648 when not asked.
//   - On a broker it needs no ACL. On the CONTROLLER listener (answered by
//     the controller role, controller/active/describe.go) it needs ALTER on
//     the cluster, as Kafka's controllers require (ControllerApis: the
//     controller quorum is described to cluster operators only).
//
// Version notes:
//   - v1: endpoint type; v2: include fenced brokers
func describeClusterEntry(h Host) api.Entry {
	return api.Entry{
		Key: 60, Client: api.Versions(0, 2), Handle: bindTo(h, handleDescribeCluster),
		Controller: api.Versions(0, 2),
		Rule:       api.Needs("none (as in Kafka)", 0, api.NoACL),
		CtlRule:    &api.Rule{Need: "on the CONTROLLER listener: ALTER on CLUSTER (as Kafka's controllers)", Blast: 1, Check: api.ClusterTop(acl.OpAlter)},
	}
}

func handleDescribeCluster(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = endpointTypeBrokers
	switch req.EndpointType {
	case endpointTypeBrokers:
	case endpointTypeControllers:
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr("fjord: this is a broker endpoint; ask a controller listener for the controllers (endpoint type 2)")
		respond(resp)
		return
	default:
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("fjord: unsupported endpoint type %d (1 = brokers, 2 = controllers)", req.EndpointType))
		respond(resp)
		return
	}
	img := h.Image()
	resp.ClusterID = h.ClusterID()
	resp.ControllerID = h.ControllerID(img)
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = h.ClusterOps(cc)
	}
	listener := h.ListenerName(cc)
	for _, bs := range img.Brokers() {
		if bs.Fenced && !req.IncludeFencedBrokers {
			continue
		}
		e, ok := img.Endpoint(bs.ID, listener)
		if !ok {
			continue
		}
		mb := kmsg.NewDescribeClusterResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.IsFenced = bs.ID, e.Host, e.Port, bs.Fenced
		if bs.Rack != "" {
			r := bs.Rack
			mb.Rack = &r
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	respond(resp)
}

// DescribeCluster endpoint types (KIP-919).
const (
	endpointTypeBrokers     = 1
	endpointTypeControllers = 2
)
