package active

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/fjordlog/fjord/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The CONTROLLER listener's Kafka half serves brokers, not clients: broker
// registration and heartbeats, producer-id blocks, and the admin requests
// brokers forward, all decided by the Controller (Call); and, on any voter,
// the metadata log for broker-only nodes to follow (metalog.go); and, for
// admin clients given bootstrap.controllers, DescribeCluster of the
// controllers (describe.go). A node
// that does not lead the quorum answers NOT_CONTROLLER and the broker
// retries at the leader.

// apis are the keys and versions the CONTROLLER listener serves.
var apis = map[int16][2]int16{
	1:  {12, 12}, // Fetch of the metadata log (broker-only nodes)
	59: {0, 1},   // FetchSnapshot of the metadata image
	18: {0, 4},   // ApiVersions
	19: {0, 7},   // CreateTopics
	20: {0, 6},   // DeleteTopics
	33: {0, 2},   // AlterConfigs
	37: {0, 3},   // CreatePartitions
	43: {0, 2},   // ElectLeaders
	44: {0, 1},   // IncrementalAlterConfigs
	49: {0, 1},   // AlterClientQuotas
	51: {0, 0},   // AlterUserScramCredentials (scram.go)
	45: {0, 1},   // AlterPartitionReassignments
	46: {0, 0},   // ListPartitionReassignments
	30: {0, 3},   // CreateAcls (acl.go)
	31: {0, 3},   // DeleteAcls (acl.go)
	56: {2, 3},   // AlterPartition (topic ids)
	60: {0, 2},   // DescribeCluster of the controllers (describe.go)
	62: {0, 4},   // BrokerRegistration
	63: {0, 1},   // BrokerHeartbeat
	67: {0, 0},   // AllocateProducerIDs
}

// saslAPIs are served, by the protocol server's SASL gate, on a SASL
// CONTROLLER listener only.
var saslAPIs = map[int16][2]int16{
	17: {0, 1}, // SaslHandshake
	36: {0, 2}, // SaslAuthenticate
}

// versions is apis as a protocol.Versions, with saslAPIs on a SASL
// listener (clients pick their SASL flow from ApiVersions).
type versions struct{ sasl bool }

func (v versions) Supported(key int16) (int16, int16, bool) {
	r, ok := apis[key]
	if !ok && v.sasl {
		r, ok = saslAPIs[key]
	}
	return r[0], r[1], ok
}

func (v versions) All() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis)+len(saslAPIs))
	for k, r := range apis {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: r[0], MaxVersion: r[1]})
	}
	for k, r := range saslAPIs {
		if v.sasl {
			out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: r[0], MaxVersion: r[1]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

// kafkaHandler serves the CONTROLLER listener's Kafka connections.
type kafkaHandler struct{ c *Controller }

func (h kafkaHandler) Handle(ctx context.Context, req *protocol.Request, respond protocol.Responder) {
	if api, ok := req.Body.(*kmsg.ApiVersionsRequest); ok {
		resp := api.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = versions{sasl: h.c.cfg.SASL != nil}.All()
		resp.FinalizedFeaturesEpoch = -1
		respond(resp, nil)
		return
	}
	if dc, ok := req.Body.(*kmsg.DescribeClusterRequest); ok {
		respond(h.c.describeControllers(dc), nil)
		return
	}
	// Decisions wait for the quorum; the reader goroutine must not.
	go func() {
		switch r := req.Body.(type) {
		case *kmsg.FetchRequest:
			respond(h.c.serveMetadataFetch(ctx, r), nil)
			return
		case *kmsg.FetchSnapshotRequest:
			respond(h.c.serveMetadataSnapshot(r), nil)
			return
		}
		resp := h.c.Call(ctx, req.Body)
		if resp == nil {
			resp = ErrorResponse(req.Body, kerr.NotController.Code)
		}
		if resp == nil {
			respond(nil, fmt.Errorf("active: no answer for api key %d", req.Key)) // closes the connection
			return
		}
		respond(resp, nil)
	}()
}

// ErrorResponse answers req, one of the requests a Controller decides,
// with code everywhere its response has an error code: the top level, or
// every topic the request names. It is nil for any other request. The
// CONTROLLER listener answers NOT_CONTROLLER with it; a broker that could
// not reach the controller answers its client REQUEST_TIMED_OUT.
func ErrorResponse(kreq kmsg.Request, code int16) kmsg.Response {
	switch req := kreq.(type) {
	case *kmsg.BrokerRegistrationRequest:
		r := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
		r.ErrorCode = code
		return r
	case *kmsg.BrokerHeartbeatRequest:
		r := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
		r.ErrorCode = code
		return r
	case *kmsg.AllocateProducerIDsRequest:
		r := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
		r.ErrorCode = code
		return r
	case *kmsg.CreateTopicsRequest:
		r := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = t.Topic, code
			r.Topics = append(r.Topics, st)
		}
		return r
	case *kmsg.DeleteTopicsRequest:
		r := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, n := range req.TopicNames {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.ErrorCode = &n, code
			r.Topics = append(r.Topics, st)
		}
		for _, t := range req.Topics {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.TopicID, st.ErrorCode = t.Topic, t.TopicID, code
			r.Topics = append(r.Topics, st)
		}
		return r
	case *kmsg.AlterPartitionRequest:
		r := req.ResponseKind().(*kmsg.AlterPartitionResponse)
		r.ErrorCode = code
		return r
	case *kmsg.ElectLeadersRequest:
		r := req.ResponseKind().(*kmsg.ElectLeadersResponse)
		r.ErrorCode = code
		return r
	case *kmsg.IncrementalAlterConfigsRequest:
		r := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range req.Resources {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName, sr.ErrorCode = rr.ResourceType, rr.ResourceName, code
			r.Resources = append(r.Resources, sr)
		}
		return r
	case *kmsg.AlterConfigsRequest:
		r := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, rr := range req.Resources {
			sr := kmsg.NewAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName, sr.ErrorCode = rr.ResourceType, rr.ResourceName, code
			r.Resources = append(r.Resources, sr)
		}
		return r
	case *kmsg.AlterPartitionAssignmentsRequest:
		r := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		r.ErrorCode = code
		return r
	case *kmsg.ListPartitionReassignmentsRequest:
		r := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		r.ErrorCode = code
		return r
	case *kmsg.CreatePartitionsRequest:
		r := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range req.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode = t.Topic, code
			r.Topics = append(r.Topics, st)
		}
		return r
	case *kmsg.CreateACLsRequest:
		r := req.ResponseKind().(*kmsg.CreateACLsResponse)
		for range req.Creations {
			sr := kmsg.NewCreateACLsResponseResult()
			sr.ErrorCode = code
			r.Results = append(r.Results, sr)
		}
		return r
	case *kmsg.DeleteACLsRequest:
		r := req.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range req.Filters {
			sr := kmsg.NewDeleteACLsResponseResult()
			sr.ErrorCode = code
			r.Results = append(r.Results, sr)
		}
		return r
	case *kmsg.AlterClientQuotasRequest:
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
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		r := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		var users []string
		for _, d := range req.Deletions {
			if !slices.Contains(users, d.Name) {
				users = append(users, d.Name)
			}
		}
		for _, u := range req.Upsertions {
			if !slices.Contains(users, u.Name) {
				users = append(users, u.Name)
			}
		}
		for _, u := range users {
			rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			rr.User, rr.ErrorCode = u, code
			r.Results = append(r.Results, rr)
		}
		return r
	}
	return nil
}
