package active

import (
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeControllers answers DescribeCluster on the CONTROLLER listener
// as Kafka's controllers do (KIP-919, what an admin client configured with
// bootstrap.controllers asks first): endpoint type 2 lists the voters at
// their CONTROLLER listener (controller.quorum.voters) and the active
// controller's id (-1 while none is known, or when it is not among them);
// endpoint type 1 (brokers, and v0, which cannot name a type) is
// MISMATCHED_ENDPOINT_TYPE (INVALID_REQUEST at v0), any other type
// UNSUPPORTED_ENDPOINT_TYPE. Voters are never fenced; no rack is known.
// Answered by any voter from its configuration, without the quorum.
func (c *Controller) describeControllers(req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = 2
	switch req.EndpointType {
	case 2:
	case 1:
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		if req.Version == 0 {
			resp.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.ErrorMessage = kmsg.StringPtr("fjord: this is a controller endpoint; ask a broker listener for the brokers (endpoint type 1)")
		return resp
	default:
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("fjord: unsupported endpoint type %d (1 = brokers, 2 = controllers)", req.EndpointType))
		return resp
	}
	resp.ClusterID = c.cfg.ClusterID
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = allClusterOperations
	}
	ids := make([]int32, 0, len(c.cfg.Voters))
	for id := range c.cfg.Voters {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	resp.ControllerID = -1
	leader := c.Leader()
	for _, id := range ids {
		host, port, err := net.SplitHostPort(c.cfg.Voters[id])
		if err != nil {
			continue // validated at start; never here
		}
		p, err := strconv.ParseInt(port, 10, 32)
		if err != nil {
			continue
		}
		mb := kmsg.NewDescribeClusterResponseBroker()
		mb.NodeID, mb.Host, mb.Port = id, host, int32(p)
		resp.Brokers = append(resp.Brokers, mb)
		if id == leader {
			resp.ControllerID = id
		}
	}
	return resp
}

// allClusterOperations is the KIP-430 bit set of every cluster operation
// (no authorization is configured on this listener), in Kafka's
// AclOperation codes: CREATE (5), ALTER (7), DESCRIBE (8), CLUSTER_ACTION
// (9), DESCRIBE_CONFIGS (10), ALTER_CONFIGS (11), IDEMPOTENT_WRITE (12):
// 8096, what a broker without an authorizer answers too (broker/acl).
const allClusterOperations = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
