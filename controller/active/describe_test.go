package active

import (
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster on the CONTROLLER listener: the voters for endpoint
// type 2, with the active controller; the broker type and unknown types
// refused as Kafka's controllers refuse them.
func TestDescribeClusterControllers(t *testing.T) {
	_, addr := startOne(t)
	host, port, _ := net.SplitHostPort(addr)
	for _, tc := range []struct {
		version  int16
		endpoint int8
		code     int16
	}{
		// kgo sends the highest version both sides know (v2).
		{2, 1, kerr.MismatchedEndpointType.Code},
		{2, 2, 0},
		{2, 7, kerr.UnsupportedEndpointType.Code},
	} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.EndpointType = tc.version, tc.endpoint
		req.IncludeClusterAuthorizedOperations = true
		resp := request(t, addr, req).(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != tc.code {
			t.Errorf("v%d type %d: code %d, want %d", tc.version, tc.endpoint, resp.ErrorCode, tc.code)
			continue
		}
		if tc.code != 0 {
			continue
		}
		if len(resp.Brokers) != 1 || resp.ControllerID != 0 || resp.EndpointType != 2 || resp.ClusterID != "test-cluster" {
			t.Fatalf("v%d: %+v", tc.version, resp)
		}
		// KIP-430: Kafka's value for every cluster operation, as a broker
		// without an authorizer answers it (broker/acl's tests).
		if resp.ClusterAuthorizedOperations != 8096 {
			t.Errorf("v%d: cluster authorized operations %d, want 8096", tc.version, resp.ClusterAuthorizedOperations)
		}
		if b := resp.Brokers[0]; b.NodeID != 0 || b.Host != host || strconv.Itoa(int(b.Port)) != port || b.IsFenced {
			t.Errorf("v%d: voter %+v, want 0 at %s", tc.version, b, addr)
		}
	}
}
