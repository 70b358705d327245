package broker

import (
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/active"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-3
//
// Behaviour:
//   - Forwarded to the active controller, which grows each topic to Count
//     partitions, placed automatically or by the request's assignment of
//     the new partitions, and commits them; the answer comes once this
//     broker's image has them. Errors as Kafka: UNKNOWN_TOPIC_OR_PARTITION,
//     INVALID_PARTITIONS when Count is not above the current count,
//     INVALID_REPLICATION_FACTOR when the topic's replication factor exceeds
//     the live brokers, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST for a
//     topic named twice.
//   - New partitions whose replicas would take this broker past its
//     descriptor budget are POLICY_VIOLATION (fdbudget.go), checked here.
//   - ValidateOnly checks and changes nothing.
//
// Version notes:
//   - v2: flexible; v3: same as v2 (KIP-1075 bump)
func init() { regKey(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	b.goLoop(func() {
		ctx, cancel := adminCtx(cc.ctx, req.TimeoutMillis)
		defer cancel()
		refused := b.refuseCreatePartitions(req)
		var kresp kmsg.Response = req.ResponseKind()
		if len(req.Topics) > 0 {
			var err error
			if kresp, err = b.ctl.call(ctx, req); err != nil {
				kresp = active.ErrorResponse(req, kerr.RequestTimedOut.Code)
			}
		}
		resp := kresp.(*kmsg.CreatePartitionsResponse)
		resp.Version = req.Version
		if !req.ValidateOnly {
			want := map[string]int32{}
			for _, rt := range req.Topics {
				want[rt.Topic] = rt.Count
			}
			for _, st := range resp.Topics {
				if st.ErrorCode == 0 {
					name, n := st.Topic, want[st.Topic]
					b.waitImage(ctx, func(img *controller.Image) bool {
						t := img.Topic(name)
						return t == nil || int32(len(t.Partitions)) >= n
					})
				}
			}
		}
		resp.Topics = append(resp.Topics, refused...)
		respond(resp)
	})
}
