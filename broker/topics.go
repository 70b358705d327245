package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/controller"
)

// Topic administration goes through the active controller; this file is
// the broker's side: forward, then wait until this broker's own image shows
// the outcome, so the client that asked here sees it here at once.

// createTopics is CreateTopics for the broker itself (autoCreate): the
// topics past the descriptor budget refused, the others forwarded, the
// answer once this broker's image has the topics created.
func (b *Broker) createTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	live := b.live()
	refused := b.replicas.RefuseCreateTopics(req, live.NumPartitions, live.DefaultReplication)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	var err error
	if len(req.Topics) > 0 {
		resp, err = api.ForwardTo[*kmsg.CreateTopicsResponse](ctx, forwarder{b}, req, 0, nil)
	}
	return created(resp, err, refused)
}

// created completes the answer to a forwarded CreateTopics: each topic of a
// controller that could not be reached (err) is REQUEST_TIMED_OUT saying
// why, and the topics refused here (refuseCreateTopics) come last.
func created(resp *kmsg.CreateTopicsResponse, err error, refused []kmsg.CreateTopicsResponseTopic) *kmsg.CreateTopicsResponse {
	if err != nil {
		msg := "active controller unreachable: " + err.Error()
		for i := range resp.Topics {
			resp.Topics[i].ErrorMessage = &msg
		}
	}
	resp.Topics = append(resp.Topics, refused...)
	return resp
}

// autoCreate creates name with the default partitions and replication
// factor, as a client's first Metadata or Produce for it asks. It returns
// 0 when the topic exists afterwards (created here or concurrently).
func (b *Broker) autoCreate(ctx context.Context, name string) int16 {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	ctx, cancel := api.AdminCtx(ctx, req.TimeoutMillis)
	defer cancel()
	resp := b.createTopics(ctx, req)
	code := resp.Topics[0].ErrorCode
	if code == kerr.TopicAlreadyExists.Code {
		b.replicas.WaitImage(ctx, func(img *controller.Image) bool { return img.Topic(name) != nil })
		return 0
	}
	if code != 0 {
		b.log.Warn().Str("topic", name).Int16("code", code).Msg("auto-creating topic")
	}
	return code
}
