package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ParseConnOverrides parses max.connections.per.ip.overrides: comma
// separated ip:count pairs (an IPv6 address's count follows its last
// colon). Kafka also takes host names, resolved when the value is read;
// Fjord takes IP addresses only, so that no DNS lookup ever stands between
// accept and serve, and refuses a host name rather than ignore it.
func ParseConnOverrides(v string) (map[netip.Addr]int64, error) {
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
	if _, err := ParseConnOverrides(v); err != nil {
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
