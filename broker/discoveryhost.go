package broker

import (
	"context"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/discovery"
	"github.com/fjordlog/fjord/broker/sharecoord"
	"github.com/fjordlog/fjord/broker/txncoord"
	"github.com/fjordlog/fjord/controller"
)

// discoveryHost is what the discovery APIs (their room: broker/discovery)
// need of the broker.
type discoveryHost struct{ b *Broker }

var _ discovery.Host = discoveryHost{}

func (h discoveryHost) Go(fn func()) bool                      { return h.b.goLoop(fn) }
func (h discoveryHost) Image() *controller.Image               { return h.b.image() }
func (h discoveryHost) ClusterID() string                      { return h.b.clusterID }
func (h discoveryHost) NodeID() int32                          { return h.b.cfg.NodeID }
func (h discoveryHost) ListenerName(cc *api.Conn) string       { return h.b.advertised[cc.Listener].Name }
func (h discoveryHost) AutoCreateTopics() bool                 { return h.b.cfg.AutoCreateTopics }
func (h discoveryHost) Groups() *coordinator.Coordinator       { return h.b.coord }
func (h discoveryHost) Txns() *txncoord.Coordinator            { return h.b.txns }
func (h discoveryHost) EnsureOffsetsTopic()                    { h.b.ensureOffsetsTopic() }
func (h discoveryHost) EnsureTxnTopic()                        { h.b.ensureTxnTopic() }
func (h discoveryHost) Shares() *sharecoord.Coordinator        { return h.b.shares }
func (h discoveryHost) EnsureShareStateTopic()                 { h.b.ensureShareStateTopic() }
func (h discoveryHost) Code(err error) int16                   { return errorCode(err) }
func (h discoveryHost) Log() *zerolog.Logger                   { return &h.b.log }
func (h discoveryHost) ClusterOps(cc *api.Conn) int32          { return h.b.clusterOps(cc) }
func (h discoveryHost) TopicName(n string, id [16]byte) string { return h.b.topicName(n, id) }

func (h discoveryHost) AutoCreate(ctx context.Context, name string) int16 {
	return h.b.autoCreate(ctx, name)
}

func (h discoveryHost) AuthorizedOps(cc *api.Conn, rt acl.ResourceType, name string) int32 {
	return h.b.authorizedOps(cc, rt, name)
}

// FromPeer: the peer clients' client id (peerClientID) on the listener
// they dial (interBrokerListener). A client may take that id; it is then
// answered as a broker would be, for the asked node only, which tells it
// nothing more.
func (h discoveryHost) FromPeer(cc *api.Conn) bool {
	if !strings.HasPrefix(cc.ClientID, peerClientIDPrefix) || cc.Listener < 0 || cc.Listener >= len(h.b.advertised) {
		return false
	}
	return h.b.advertised[cc.Listener].Name == h.b.interBrokerListener()
}

func (h discoveryHost) AskPeer(ctx context.Context, peer int32, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	return h.b.peers.ask(ctx, h.b, peer, req, timeout)
}

// ControllerID is the controller id told to clients: the active
// controller when it is also a live broker, else this broker. Clients send
// admin requests to that id, and every broker forwards them, so it only
// has to be a broker they can reach (Kafka answers a random live broker).
func (h discoveryHost) ControllerID(img *controller.Image) int32 {
	if l := h.b.meta.Leader(); l >= 0 {
		if bs, ok := img.Broker(l); ok && !bs.Fenced {
			return bs.ID
		}
	}
	return h.b.cfg.NodeID
}
