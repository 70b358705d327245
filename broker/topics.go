package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/admin"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/controller"
)

// Topic administration goes through the active controller (broker/admin);
// this file is the broker's own use of it: auto-creation.

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
	resp := admin.CreateTopics(ctx, adminHost{forwarder{b}}, req)
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
