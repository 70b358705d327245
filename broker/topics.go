package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/controller"
)

// Topic administration goes through the active controller; this file is
// the broker's side: forward, then wait until this broker's own image shows
// the outcome, so the client that asked here sees it here at once.

// adminTimeout bounds an admin request whose client gave no timeout.
const adminTimeout = 30 * time.Second

func adminCtx(parent context.Context, timeoutMs int32) (context.Context, context.CancelFunc) {
	d := adminTimeout
	if timeoutMs > 0 && time.Duration(timeoutMs)*time.Millisecond < d {
		d = time.Duration(timeoutMs) * time.Millisecond
	}
	return context.WithTimeout(parent, d)
}

// validTopicName applies Kafka's rules: 1-249 characters of [a-zA-Z0-9._-],
// not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("%w: %q", errInvalidTopic, name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q contains %q (allowed: a-z A-Z 0-9 . _ -)", errInvalidTopic, name, c)
		}
	}
	return nil
}

// createTopics forwards req to the active controller and waits until the
// topics it created are in this broker's image. A controller that cannot
// be reached makes every topic REQUEST_TIMED_OUT.
func (b *Broker) createTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	refused := b.refuseCreateTopics(req)
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		resp.Topics = refused
		return resp
	}
	resp := b.forwardCreateTopics(ctx, req)
	resp.Topics = append(resp.Topics, refused...)
	return resp
}

// forwardCreateTopics is createTopics once the descriptor budget passed.
func (b *Broker) forwardCreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	kresp, _, err := b.ctl.call(ctx, req)
	if err != nil {
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = t.Topic, kerr.RequestTimedOut.Code
			st.NumPartitions, st.ReplicationFactor = -1, -1
			msg := "active controller unreachable: " + err.Error()
			st.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	resp := kresp.(*kmsg.CreateTopicsResponse)
	resp.Version = req.Version
	if !req.ValidateOnly {
		for _, st := range resp.Topics {
			if st.ErrorCode != 0 {
				continue
			}
			id := st.TopicID
			b.waitImage(ctx, func(img *controller.Image) bool { return img.TopicByID(id) != nil })
		}
	}
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
	ctx, cancel := adminCtx(ctx, req.TimeoutMillis)
	defer cancel()
	resp := b.createTopics(ctx, req)
	code := resp.Topics[0].ErrorCode
	if code == kerr.TopicAlreadyExists.Code {
		b.waitImage(ctx, func(img *controller.Image) bool { return img.Topic(name) != nil })
		return 0
	}
	if code != 0 {
		b.log.Warn().Str("topic", name).Int16("code", code).Msg("auto-creating topic")
	}
	return code
}

// allocProducerID hands out a producer id. Ids come in blocks from the
// controller, recorded in the metadata log before use, so they are unique
// across the cluster and never reused after a crash.
func (b *Broker) allocProducerID(ctx context.Context) (int64, error) {
	b.pidMu.Lock()
	if b.pidMu.next < b.pidMu.limit {
		id := b.pidMu.next
		b.pidMu.next++
		b.pidMu.Unlock()
		return id, nil
	}
	b.pidMu.Unlock()
	start, n, err := b.ctl.AllocateProducerIDs(ctx, b.brokerEpoch.Load())
	if err != nil {
		return 0, err
	}
	b.pidMu.Lock()
	defer b.pidMu.Unlock()
	// Concurrent callers may each fetch a block; the later one wins and
	// the rest of the earlier block is skipped, never reused.
	b.pidMu.next, b.pidMu.limit = start+1, start+int64(n)
	return start, nil
}
