package broker

import (
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/replica"
)

// readFailed handles an error from reading p's log for a fetch: a damaged
// log goes to its core (replica.Partition.ReadFailed), which logs it once
// and decides — resign, keep leading, or stop fetching and repair (see the
// replica package).
func (b *Broker) readFailed(p *replica.Partition, err error) {
	if p.ReadFailed(err) {
		b.metrics.LogDamage.Inc()
	}
}

// fetchHost gives the replica fetchers what they need of the broker.
type fetchHost struct{ b *Broker }

func (h fetchHost) Go(fn func()) bool       { return h.b.goLoop(fn) }
func (h fetchHost) NodeID() int32           { return h.b.cfg.NodeID }
func (h fetchHost) BrokerEpoch() int64      { return h.b.brokerEpoch.Load() }
func (h fetchHost) Logger() *zerolog.Logger { return &h.b.log }

// ClientOpts are the replica fetchers' extra client options: TLS when the
// inter-broker listener is SSL, SASL when it is SASL (interBrokerOpts).
func (h fetchHost) ClientOpts() []kgo.Opt { return h.b.interBrokerOpts() }
func (h fetchHost) Repaired(*replica.Partition) {
	h.b.metrics.LogRepairs.Inc()
}

// LeaderAddr is broker id's endpoint on the inter-broker listener.
func (h fetchHost) LeaderAddr(id int32) (string, error) {
	e, ok := endpoint(h.b.image(), id, h.b.interBrokerListener())
	if !ok {
		return "", fmt.Errorf("leader %d has no %s endpoint", id, h.b.interBrokerListener())
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), nil
}

// interBrokerListener names the listener this broker fetches through: the
// leader's advertised endpoint of that name (inter.broker.listener.name,
// else this broker's first client listener).
func (b *Broker) interBrokerListener() string {
	if n := NormaliseListenerName(b.cfg.InterBrokerListenerName); n != "" {
		return n
	}
	if len(b.advertised) == 0 {
		return ""
	}
	return b.advertised[0].Name
}
