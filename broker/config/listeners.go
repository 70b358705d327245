package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// SecurityProtocols are Kafka's listener security protocols.
var SecurityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// Listener names are matched as Kafka matches them (ListenerName and
// KafkaConfig):
//   - the names in listeners and advertised.listeners, the keys of
//     listener.security.protocol.map and inter.broker.listener.name are
//     upper-cased (ListenerName.normalised), so client://, CLIENT:SSL and
//     inter.broker.listener.name=Client all name one listener;
//   - controller.listener.names is compared as written with those
//     upper-cased names, so a lower-case entry names no listener (Kafka
//     then refuses to start; Validate says so);
//   - the listener.name.<l>. prefix of per-listener keys uses the
//     lower-case name (tlsconf, sasl).
//
// A listener name that the map does not give a protocol stops start-up,
// as in Kafka ("No security protocol defined for listener"): serving it as
// PLAINTEXT would silently drop the security its author meant it to have.

// NormaliseListenerName is a listener name as Kafka compares it.
func NormaliseListenerName(name string) string {
	return strings.ToUpper(strings.TrimSpace(name))
}

// ParseProtocolMap parses listener.security.protocol.map: NAME:PROTOCOL
// pairs, names normalised (NormaliseListenerName) and protocols
// case-insensitive. A name given twice with different protocols (Kafka
// refuses client:SSL,CLIENT:PLAINTEXT, and keeps the last of two equal
// spellings) is refused: either way one of the two is silently wrong.
func ParseProtocolMap(s string) (map[string]string, error) {
	out := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		name, proto, ok := strings.Cut(strings.TrimSpace(item), ":")
		name, proto = NormaliseListenerName(name), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" || !slices.Contains(SecurityProtocols, proto) {
			return nil, fmt.Errorf("%q: want NAME:PROTOCOL with PROTOCOL one of %s", item, strings.Join(SecurityProtocols, ", "))
		}
		if prev, dup := out[name]; dup && prev != proto {
			return nil, fmt.Errorf("listener %s is given twice, as %s and as %s (names are compared in upper case)", name, prev, proto)
		}
		out[name] = proto
	}
	return out, nil
}

// protocolMap is the listener.security.protocol.map in force, as Kafka's
// effectiveListenerSecurityProtocolMap builds it: the map given, else
// Kafka's default (each protocol's own name mapped to it) plus, when no
// controller.listener.names entry and no listener is named SSL,
// SASL_PLAINTEXT or SASL_SSL, every controller.listener.names entry mapped
// to PLAINTEXT, so a plaintext KRaft cluster needs no map. Those entries
// are added as written, as Kafka adds them; a lower-case one is refused
// by Validate anyway. An empty value counts as not given (Kafka would
// take it as an empty map and refuse every listener).
func (c *Config) protocolMap() (map[string]string, error) {
	if strings.TrimSpace(c.ListenerSecurityProtocolMap) != "" {
		return ParseProtocolMap(c.ListenerSecurityProtocolMap)
	}
	out := map[string]string{}
	for _, p := range SecurityProtocols {
		out[p] = p
	}
	sslOrSASL := func(name string) bool { return name != "PLAINTEXT" && slices.Contains(SecurityProtocols, name) }
	ctl := c.controllerListenerNames()
	ls, _ := ParseListeners(c.Listeners) // Validate reports a bad value
	if slices.ContainsFunc(ctl, sslOrSASL) || slices.ContainsFunc(ls, func(l Listener) bool { return sslOrSASL(l.Name) }) {
		return out, nil
	}
	for _, n := range ctl {
		if n != "PLAINTEXT" {
			out[n] = "PLAINTEXT"
		}
	}
	return out, nil
}

// controllerListenerNames is controller.listener.names, each entry
// trimmed and kept as written.
func (c *Config) controllerListenerNames() []string {
	var out []string
	for n := range strings.SplitSeq(c.ControllerListenerNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// ListenerProtocol is the security protocol that
// listener.security.protocol.map in force (protocolMap) gives listener
// name, or "" when it gives none: Validate refuses such a configuration
// (checkListenerNames), so on a validated Config every listener, the
// inter-broker one and the controller ones have a protocol.
func (c *Config) ListenerProtocol(name string) string {
	m, err := c.protocolMap()
	if err != nil {
		return ""
	}
	return m[NormaliseListenerName(name)]
}

// checkListenerNames refuses the listener names Kafka would refuse: one
// that listener.security.protocol.map in force leaves without a protocol
// (each error names the listener, where it was named and the fix), and a
// controller.listener.names entry that matches no listener because it is
// not written in upper case.
func (c *Config) checkListenerNames() error {
	m, err := c.protocolMap()
	if err != nil {
		return fmt.Errorf("listener.security.protocol.map: %w", err)
	}
	var errs []error
	for _, n := range c.controllerListenerNames() {
		if n != NormaliseListenerName(n) {
			errs = append(errs, fmt.Errorf("controller.listener.names %q: listener names are compared in upper case, as Kafka does, so it names no listener: write %s", n, NormaliseListenerName(n)))
		}
	}
	type use struct{ name, where string }
	var uses []use
	for _, k := range []struct{ key, value string }{{"listeners", c.Listeners}, {"advertised.listeners", c.AdvertisedListeners}} {
		ls, _ := ParseListeners(k.value) // Validate reports a bad value
		for _, l := range ls {
			uses = append(uses, use{l.Name, k.key})
		}
	}
	if n := NormaliseListenerName(c.InterBrokerListenerName); n != "" {
		uses = append(uses, use{n, "inter.broker.listener.name"})
	}
	if c.HasRole("broker") && !c.HasRole("controller") {
		// A broker reaches the controllers through a listener it does
		// not have itself.
		for _, n := range c.controllerListenerNames() {
			uses = append(uses, use{NormaliseListenerName(n), "controller.listener.names"})
		}
	}
	var names, missing []string
	where := map[string]string{}
	for _, u := range uses {
		if _, seen := where[u.name]; seen {
			continue
		}
		where[u.name] = u.where
		names = append(names, u.name)
		if _, ok := m[u.name]; !ok {
			missing = append(missing, u.name)
		}
	}
	if len(missing) == 0 {
		return errors.Join(errs...)
	}
	// The fix names every listener, so it can be pasted whole: a map given
	// replaces Kafka's default rather than adding to it.
	example := make([]string, len(names))
	for i, n := range names {
		p, ok := m[n]
		if !ok {
			p = "<PROTOCOL>"
		}
		example[i] = n + ":" + p
	}
	fix := "listener.security.protocol.map=" + strings.Join(example, ",")
	protos := strings.Join(SecurityProtocols[:3], ", ") + " or " + SecurityProtocols[3]
	for _, n := range missing {
		if strings.TrimSpace(c.ListenerSecurityProtocolMap) == "" {
			errs = append(errs, fmt.Errorf("no security protocol defined for listener %s (named in %s): listener.security.protocol.map is not set, "+
				"so only PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL and a plaintext cluster's controller listeners have one; set %s (<PROTOCOL>: %s)",
				n, where[n], fix, protos))
		} else {
			errs = append(errs, fmt.Errorf("no security protocol defined for listener %s (named in %s) in listener.security.protocol.map: add it, %s (<PROTOCOL>: %s)",
				n, where[n], fix, protos))
		}
	}
	return errors.Join(errs...)
}
