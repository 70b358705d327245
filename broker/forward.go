package broker

import (
	"context"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/controller"
)

// Forwarding of the admin requests the active controller decides is
// api.Forward (broker/api/forward.go), the same sequence for every room;
// forwarder is what it needs of the broker.
type forwarder struct{ b *Broker }

func (f forwarder) Go(fn func()) bool { return f.b.goLoop(fn) }

func (f forwarder) CallController(ctx context.Context, req kmsg.Request) (kmsg.Response, uint64, error) {
	return f.b.ctl.Call(ctx, req)
}

func (f forwarder) ErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	return f.b.reg.ErrorResponse(req, code)
}

func (f forwarder) WaitOffset(ctx context.Context, offset uint64) bool {
	return waitOffset(ctx, f.b.replicas, offset)
}

func (f forwarder) WaitPeers(ctx context.Context, offset uint64) []int32 {
	return f.b.replicas.AwaitPeersApplied(ctx, offset)
}

func (f forwarder) Log() *zerolog.Logger { return &f.b.log }

// waitOffset waits until the local replicas reflect the metadata image at
// offset or a later one, and reports whether they do; false when ctx ended
// first. Offset 0 (nothing committed) is reached at once.
func waitOffset(ctx context.Context, replicas *replicamgr.Manager, offset uint64) bool {
	if offset == 0 {
		return true
	}
	return replicas.WaitImage(ctx, func(img *controller.Image) bool { return img.Version() >= offset })
}

// adminHost is what the administration APIs (their room: broker/admin)
// need of the broker: forwarding, as forwarder, and what they read.
type adminHost struct{ forwarder }

func (h adminHost) Image() *controller.Image       { return h.b.image() }
func (h adminHost) LatestImage() *controller.Image { return h.b.meta.Image() }
func (h adminHost) Authorizing() bool              { return h.b.cfg.AuthorizerClass != "" }
func (h adminHost) Replicas() *replicamgr.Manager  { return h.b.replicas }
func (h adminHost) Live() *config.Config           { return h.b.live() }
func (h adminHost) TopicName(name string, id [16]byte) string {
	return h.b.topicName(name, id)
}
