package broker

import (
	"context"
	"net"
	"time"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/ctllink"
	"github.com/fjordlog/fjord/controller"
)

// The broker's link to the controller quorum (broker/ctllink), wired from
// its config and parts: the client of the active controller, the
// lifecycle (register, heartbeat, controlled shutdown) and, on a
// broker-only node, the follower of the metadata log (quorum.go).

// newCtlClient makes the broker's client of the active controller. Made
// before the replica manager, which sends AlterPartitions through it, and
// so before the metadata log (b.meta, b.actl) and the CONTROLLER
// listener's SASL identity (b.ctlSASL) exist: those are read at each
// request.
func newCtlClient(b *Broker) *ctllink.Client {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return ctllink.NewClient(ctllink.Config{
		NodeID: b.cfg.NodeID,
		Voters: ctlVoters(b.cfg.ControllerQuorumVoters),
		Leader: func() int32 { return b.meta.Leader() },
		Local: func() ctllink.Local {
			if b.actl == nil {
				return nil // not a nil activeController in a ctllink.Local
			}
			return b.actl
		},
		// b.tls is set when the listeners are; read it at each dial.
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return b.tls.DialController(ctx, network, addr)
		},
		SASL:              func() kgosasl.Mechanism { return b.ctlSASL },
		SessionTimeout:    ms(b.cfg.BrokerSessionTimeoutMs),
		HeartbeatInterval: ms(b.cfg.BrokerHeartbeatIntervalMs),
	})
}

// ctlVoters is controller.quorum.voters as the client dials them
// (validated with the rest of the config).
func ctlVoters(s string) []ctllink.Voter {
	vs, _ := config.ParseVoters(s)
	out := make([]ctllink.Voter, 0, len(vs))
	for _, v := range vs {
		out = append(out, ctllink.Voter{ID: v.ID, Addr: v.Addr})
	}
	return out
}

// newLifecycle makes the broker's lifecycle. Made once the listeners are
// bound (it registers them as advertised); Start runs it on a broker.
func newLifecycle(b *Broker) *ctllink.Lifecycle {
	reg := ctllink.Registration{ClusterID: b.clusterID, Rack: b.cfg.BrokerRack}
	for _, a := range b.advertised {
		reg.Listeners = append(reg.Listeners, ctllink.Listener{Name: a.Name, Host: a.Host, Port: a.Port})
	}
	return ctllink.NewLifecycle(ctllink.LifecycleConfig{
		Client:          b.ctl,
		Registration:    reg,
		Replicas:        b.replicas,
		MetadataVersion: func() uint64 { return b.meta.Image().Version() },
		Ready:           func() { close(b.ready) },
		Logger:          b.log,
	})
}

// image returns the metadata image the local replicas were last matched
// to: what this broker answers from.
func (b *Broker) image() *controller.Image { return b.replicas.Image() }
