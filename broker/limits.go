package broker

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/protocol"
)

// clientLimits are the bounds shared by all the client listeners: the
// connection counts (max.connections, max.connections.per.ip and its
// overrides, read from the running configuration at each accept so
// AlterConfigs applies to the next connection) and the request memory
// budget (queued.max.request.bytes, read-only). The CONTROLLER listener's
// Kafka half has a clientLimits of its own with the same settings
// (Broker.ctlLimits): it serves the cluster's own nodes, but anyone who
// reaches the port can connect, and counted apart, clients cannot use up
// the brokers' room there, nor strangers there the clients'.
//
// Invariants: conns and budget are set once, by init, before any client
// listener serves; overrides caches the parse of one overrides value.
type clientLimits struct {
	conns  *protocol.ConnCounter
	budget *protocol.Budget

	mu        sync.Mutex
	overSrc   string
	overrides map[netip.Addr]int64
}

func (l *clientLimits) init(c *config.Config) {
	if l.conns != nil {
		return
	}
	l.conns = protocol.NewConnCounter()
	l.budget = protocol.NewBudget(c.QueuedMaxRequestBytes)
}

// perIP is ip's connection bound under c: its override, else
// max.connections.per.ip.
func (l *clientLimits) perIP(c *config.Config, ip netip.Addr) int64 {
	if c.MaxConnectionsPerIPOverride != "" {
		l.mu.Lock()
		if l.overSrc != c.MaxConnectionsPerIPOverride || l.overrides == nil {
			// The value parsed when it was set; an error here cannot happen.
			l.overrides, _ = config.ParseConnOverrides(c.MaxConnectionsPerIPOverride)
			l.overSrc = c.MaxConnectionsPerIPOverride
		}
		n, ok := l.overrides[ip]
		l.mu.Unlock()
		if ok {
			return n
		}
	}
	return int64(c.MaxConnectionsPerIP)
}

// admitConnection is the client listeners' protocol.ServerConfig.Admit, the
// one accept-time check: the connection counts first (over a limit, the
// new connection is closed at once, as Kafka closes it), then the per-ip
// connection_creation_rate (refused after the quota's throttle time).
func (b *Broker) admitConnection(remote net.Addr) (bool, time.Duration, func()) {
	return b.limits.admit(b, remote, "client", true)
}

// admitController is the CONTROLLER listener's Kafka half's Admit: the
// connection counts of its own limits, no client quota.
func (b *Broker) admitController(remote net.Addr) (bool, time.Duration, func()) {
	return b.ctlLimits.admit(b, remote, "CONTROLLER", false)
}

// admit checks remote against l's connection counts, and with quotas
// against its connection creation rate; listeners names them in the log.
func (l *clientLimits) admit(b *Broker, remote net.Addr, listeners string, quotas bool) (bool, time.Duration, func()) {
	host, _, err := net.SplitHostPort(remote.String())
	if err != nil {
		return true, 0, nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return true, 0, nil
	}
	ip = ip.Unmap()
	host = ip.String()
	c := b.live()
	release, why, first := l.conns.Acquire(host, int64(c.MaxConnections), l.perIP(c, ip))
	if why != "" {
		if first {
			total, from := l.conns.Open(host)
			b.log.Warn().Str("ip", host).Str("listeners", listeners).Str("limit", why).Int64("open", total).Int64("open_from_ip", from).
				Msg("refusing connections over a connection limit (logged once until one of this ip's connections closes)")
		}
		return false, 0, nil
	}
	if !quotas {
		return true, 0, release
	}
	if d := b.quotas.connectionDelay(host); d > 0 {
		release()
		return false, d, nil
	}
	return true, 0, release
}
