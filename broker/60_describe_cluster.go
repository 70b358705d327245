package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-2
//
// Behaviour:
//   - Answered from this broker's image: cluster id, the active controller
//     (its node id if it is a live broker, else this broker's), and
//     the brokers at their address on the listener the request came in on —
//     the unfenced ones, plus the fenced ones when v2 asks for them.
//   - EndpointType 2 (controllers, KIP-919) is not served:
//     UNSUPPORTED_ENDPOINT_TYPE.
//
// Version notes:
//   - v1: endpoint type; v2: include fenced brokers
func init() { regKey(60, 0, 2, handleDescribeCluster) }

func handleDescribeCluster(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.EndpointType == 2 {
		resp.ErrorCode = 119 // UNSUPPORTED_ENDPOINT_TYPE
		respond(resp)
		return
	}
	img := b.image()
	resp.ClusterID = b.clusterID
	resp.ControllerID = b.clientControllerID(img)
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = allClusterOperations
	}
	listener := b.advertised[cc.listener].Name
	for _, bs := range img.Brokers() {
		if bs.Fenced && !req.IncludeFencedBrokers {
			continue
		}
		e, ok := endpoint(img, bs.ID, listener)
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

// allClusterOperations is the KIP-430 bit set of every cluster operation
// (no authorization is configured).
const allClusterOperations = 1<<4 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
