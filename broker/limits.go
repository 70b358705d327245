package broker

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fjordlog/fjord/protocol"
)

// clientLimits are the bounds shared by all the client listeners: the
// connection counts (max.connections, max.connections.per.ip and its
// overrides, read from the running configuration at each accept so
// AlterConfigs applies to the next connection) and the request memory
// budget (queued.max.request.bytes, read-only). The quorum and controller
// listeners are not limited: they serve only the cluster's own nodes.
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

func (l *clientLimits) init(c *Config) {
	if l.conns != nil {
		return
	}
	l.conns = protocol.NewConnCounter()
	l.budget = protocol.NewBudget(c.QueuedMaxRequestBytes)
}

// perIP is ip's connection bound under c: its override, else
// max.connections.per.ip.
func (l *clientLimits) perIP(c *Config, ip netip.Addr) int64 {
	if c.MaxConnectionsPerIPOverride != "" {
		l.mu.Lock()
		if l.overSrc != c.MaxConnectionsPerIPOverride || l.overrides == nil {
			// The value parsed when it was set; an error here cannot happen.
			l.overrides, _ = parseConnOverrides(c.MaxConnectionsPerIPOverride)
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
	release, why, first := b.limits.conns.Acquire(host, int64(c.MaxConnections), b.limits.perIP(c, ip))
	if why != "" {
		if first {
			total, from := b.limits.conns.Open(host)
			b.log.Warn().Str("ip", host).Str("limit", why).Int64("open", total).Int64("open_from_ip", from).
				Msg("refusing connections over a connection limit (logged once until one of this ip's connections closes)")
		}
		return false, 0, nil
	}
	if d := b.quotas.connectionDelay(host); d > 0 {
		release()
		return false, d, nil
	}
	return true, 0, release
}

// parseConnOverrides parses max.connections.per.ip.overrides: comma
// separated ip:count pairs (an IPv6 address's count follows its last
// colon). Kafka also takes host names, resolved when the value is read;
// Fjord takes IP addresses only, so that no DNS lookup ever stands between
// accept and serve, and refuses a host name rather than ignore it.
func parseConnOverrides(v string) (map[netip.Addr]int64, error) {
	m := map[netip.Addr]int64{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.LastIndex(part, ":")
		if i <= 0 {
			return nil, fmt.Errorf("%q: want ip:count", part)
		}
		host := strings.Trim(strings.TrimSpace(part[:i]), "[]")
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not an IP address (Fjord takes addresses, not host names, here)", part, host)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(part[i+1:]), 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: the count must be an integer >= 0", part)
		}
		m[ip.Unmap()] = n
	}
	return m, nil
}

func setConnOverrides(c *Config, v string) error {
	if _, err := parseConnOverrides(v); err != nil {
		return err
	}
	c.MaxConnectionsPerIPOverride = v
	return nil
}

// setNonNegative parses an int >= 0 (Kafka's atLeast(0) validators).
func setNonNegative(field func(*Config) *int32) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := parseInt[int32](v)
		if err != nil {
			return err
		}
		if n < 0 {
			return fmt.Errorf("%d: must be >= 0", n)
		}
		*field(c) = n
		return nil
	}
}
