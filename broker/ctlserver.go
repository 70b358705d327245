package broker

import (
	"context"
	"sort"
	"time"

	"github.com/fjordlog/fjord/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The CONTROLLER listener's Kafka half serves brokers, not clients: broker
// registration and heartbeats, producer-id blocks, and the admin requests
// brokers forward. A node that does not lead the quorum answers
// NOT_CONTROLLER and the broker retries at the leader.

// ctlAPIs are the keys and versions the controller listener serves.
var ctlAPIs = map[int16][2]int16{
	1:  {12, 12}, // Fetch of the metadata log (broker-only nodes)
	59: {0, 1},   // FetchSnapshot of the metadata image
	18: {0, 4},   // ApiVersions
	19: {0, 7},   // CreateTopics
	20: {0, 6},   // DeleteTopics
	37: {0, 3},   // CreatePartitions
	43: {0, 2},   // ElectLeaders
	56: {2, 3},   // AlterPartition (topic ids)
	62: {0, 4},   // BrokerRegistration
	63: {0, 1},   // BrokerHeartbeat
	67: {0, 0},   // AllocateProducerIDs
}

type ctlVersions struct{}

func (ctlVersions) Supported(key int16) (int16, int16, bool) {
	r, ok := ctlAPIs[key]
	return r[0], r[1], ok
}

func (ctlVersions) All() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(ctlAPIs))
	for k, r := range ctlAPIs {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: r[0], MaxVersion: r[1]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

// ctlHandler serves the controller listener's Kafka connections.
type ctlHandler struct{ b *Broker }

func (h ctlHandler) Handle(ctx context.Context, req *protocol.Request, respond protocol.Responder) {
	if api, ok := req.Body.(*kmsg.ApiVersionsRequest); ok {
		resp := api.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = ctlVersions{}.All()
		resp.FinalizedFeaturesEpoch = -1
		respond(resp, nil)
		return
	}
	// Decisions wait for the quorum; the reader goroutine must not.
	go func() {
		switch r := req.Body.(type) {
		case *kmsg.FetchRequest:
			respond(h.b.serveMetadataFetch(ctx, r), nil)
			return
		case *kmsg.FetchSnapshotRequest:
			respond(h.b.serveMetadataSnapshot(r), nil)
			return
		}
		var resp kmsg.Response
		if h.b.actl != nil {
			resp = h.b.actl.Call(ctx, req.Body)
		}
		if resp == nil {
			resp = notControllerResponse(req.Body)
		}
		respond(resp, nil)
	}()
}

// serveController starts the controller listener's Kafka half.
func (b *Broker) serveController() {
	if b.ctlKafka == nil {
		return
	}
	s := protocol.NewServer(protocol.ServerConfig{
		MaxFrameBytes: b.cfg.SocketRequestMaxBytes,
		MaxInFlight:   16,
		IdleTimeout:   time.Duration(b.cfg.ConnectionsMaxIdleMs) * time.Millisecond,
		DrainTimeout:  5 * time.Second,
	}, ctlHandler{b}, ctlVersions{}, b.log.With().Str("listener", "CONTROLLER").Logger())
	s.Serve(b.ctlKafka)
	b.ctlServer = s
}

// notControllerResponse answers req with NOT_CONTROLLER everywhere it has
// an error code.
func notControllerResponse(kreq kmsg.Request) kmsg.Response {
	nc := kerr.NotController.Code
	switch req := kreq.(type) {
	case *kmsg.BrokerRegistrationRequest:
		r := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
		r.ErrorCode = nc
		return r
	case *kmsg.BrokerHeartbeatRequest:
		r := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
		r.ErrorCode = nc
		return r
	case *kmsg.AllocateProducerIDsRequest:
		r := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
		r.ErrorCode = nc
		return r
	case *kmsg.CreateTopicsRequest:
		r := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = t.Topic, nc
			r.Topics = append(r.Topics, st)
		}
		return r
	case *kmsg.DeleteTopicsRequest:
		r := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, n := range req.TopicNames {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.ErrorCode = &n, nc
			r.Topics = append(r.Topics, st)
		}
		for _, t := range req.Topics {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.TopicID, st.ErrorCode = t.Topic, t.TopicID, nc
			r.Topics = append(r.Topics, st)
		}
		return r
	case *kmsg.AlterPartitionRequest:
		r := req.ResponseKind().(*kmsg.AlterPartitionResponse)
		r.ErrorCode = nc
		return r
	case *kmsg.ElectLeadersRequest:
		r := req.ResponseKind().(*kmsg.ElectLeadersResponse)
		r.ErrorCode = nc
		return r
	case *kmsg.CreatePartitionsRequest:
		r := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range req.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode = t.Topic, nc
			r.Topics = append(r.Topics, st)
		}
		return r
	}
	return nil
}
