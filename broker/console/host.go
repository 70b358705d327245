package console

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// AllowedHostsKey is the broker key that names further hosts the console
// answers to; refusals and warnings name it so the operator knows the fix.
const AllowedHostsKey = "fjord.console.allowed.hosts"

// Hosts is the set of Host header values the console answers to: its
// defence against DNS rebinding. A page on evil.example whose name is then
// re-pointed at 127.0.0.1 makes the visitor's browser send requests to the
// console, and the browser, seeing one origin, lets the page read the
// answers, records included. What the page cannot change is the Host
// header: it still says evil.example. So the console answers only the
// names it is reached by: the address it is bound to and the name it was
// configured with (with the bound port), localhost, 127.0.0.1 and [::1]
// (with the bound port) when it listens on loopback or on every address,
// and the hosts of fjord.console.allowed.hosts: host:port for that port
// only, a bare host on any port (what a reverse proxy forwards often has
// none).
//
// A wildcard bind (0.0.0.0, [::]) with nothing configured answers every
// Host, as before this check existed: the console cannot know the names it
// is reached by there, and refusing them all would turn a working set-up
// into a broken one. Unchecked reports it so that start-up can warn.
// "*" among the allowed hosts turns the check off on purpose, without the
// warning.
//
// Host names compare in lower case without a trailing dot, IP literals in
// netip's form (an IPv4-mapped address as IPv4), and a Host without a port
// means port 80, as for any http URL.
type Hosts struct {
	any       bool            // every Host is answered
	unchecked bool            // any, because of a wildcard bind with nothing configured
	exact     map[string]bool // canonical host:port
	names     map[string]bool // canonical hosts answered on any port
}

// ParseAllowedHosts checks a fjord.console.allowed.hosts value: comma
// separated host, host:port, [ipv6] or [ipv6]:port, or "*". It returns the
// entries in canonical form; empty entries are skipped.
func ParseAllowedHosts(v string) ([]string, error) {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			continue
		case item == "*":
			out = append(out, item)
			continue
		}
		host, port, ok := splitHost(item)
		if !ok || !validHostName(host) {
			return nil, fmt.Errorf("%q is not a host or host:port", item)
		}
		out = append(out, joinHost(canonHost(host), port))
	}
	return out, nil
}

// NewHosts returns the hosts a console answers to. configured is its
// fjord.console.listener value (its host may be a name or empty), bound
// the address its listener got (the port chosen for :0 included), allowed
// the result of ParseAllowedHosts.
func NewHosts(configured, bound string, allowed []string) (Hosts, error) {
	bhost, bport, err := net.SplitHostPort(bound)
	if err != nil {
		return Hosts{}, fmt.Errorf("console bound to %q: %w", bound, err)
	}
	h := Hosts{exact: map[string]bool{}, names: map[string]bool{}}
	h.exact[joinHost(canonHost(bhost), bport)] = true
	if chost, _, err := net.SplitHostPort(configured); err == nil && chost != "" {
		h.exact[joinHost(canonHost(chost), bport)] = true
	}
	ip, _ := netip.ParseAddr(bhost)
	if ip.IsLoopback() || ip.IsUnspecified() {
		for _, lo := range []string{"localhost", "127.0.0.1", "::1"} {
			h.exact[joinHost(lo, bport)] = true
		}
	}
	if ip.IsUnspecified() && len(allowed) == 0 {
		h.any, h.unchecked = true, true
	}
	for _, a := range allowed {
		if a == "*" {
			h.any = true
			continue
		}
		host, port, ok := splitHost(a)
		if !ok {
			return Hosts{}, fmt.Errorf("%s: %q is not a host or host:port", AllowedHostsKey, a)
		}
		if port == "" {
			h.names[canonHost(host)] = true
		} else {
			h.exact[joinHost(canonHost(host), port)] = true
		}
	}
	return h, nil
}

// Unchecked reports that every Host is answered because the console
// listens on every address and no allowed hosts are configured.
func (h Hosts) Unchecked() bool { return h.unchecked }

// Allows reports whether the console answers a request whose Host (its
// Host header, or the host of an absolute request URI) is hostport.
func (h Hosts) Allows(hostport string) bool {
	if h.any {
		return true
	}
	host, port, ok := splitHost(hostport)
	if !ok || host == "" {
		return false
	}
	host = canonHost(host)
	if port == "" {
		port = "80"
	}
	return h.names[host] || h.exact[joinHost(host, port)]
}

// splitHost splits host[:port] or [v6][:port]; port is "" when absent, and
// when present must be a number in [1, 65535], returned without leading
// zeros.
func splitHost(s string) (host, port string, ok bool) {
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		return h, strconv.FormatUint(n, 10), err == nil && n >= 1
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		_, err := netip.ParseAddr(s[1 : len(s)-1])
		return s[1 : len(s)-1], "", err == nil
	}
	return s, "", !strings.ContainsAny(s, ":[]")
}

// validHostName: an IP literal, or a DNS-like name of letters, digits,
// '-', '_' and '.'.
func validHostName(h string) bool {
	if h == "" {
		return false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

func canonHost(h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func joinHost(host, port string) string {
	if port == "" {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

// Bounds on the refusal log.
const (
	// refusalLogEvery is how often one host's refusals are logged at most.
	refusalLogEvery = time.Minute
	// maxRefusedHosts is how many hosts the refusal log remembers; a
	// visitor inventing hosts makes it hold no more.
	maxRefusedHosts = 256
	// maxLoggedHost is how much of a Host header is logged and echoed
	// (the server reads headers of up to 64 KiB).
	maxLoggedHost = 128
)

// refusalLog decides which refusals are logged: each distinct host at most
// once per refusalLogEvery. It is pure (now is an argument); HostFilter
// holds it under a mutex.
//
// Invariant: len(last) <= maxRefusedHosts.
type refusalLog struct {
	last map[string]refused
	// overflow counts refusals not logged because the map was full of
	// hosts logged within the last refusalLogEvery; the next line logged
	// reports and resets it.
	overflow int
}

type refused struct {
	at       time.Time // when this host was last logged
	unlogged int       // its refusals since, not logged
}

// note records a refusal of host at now. It reports whether to log it,
// with how many refusals of this host (repeats) and of hosts not
// remembered (overflow) went unlogged since.
func (l *refusalLog) note(host string, now time.Time) (log bool, repeats, overflow int) {
	if l.last == nil {
		l.last = map[string]refused{}
	}
	r, seen := l.last[host]
	if seen && now.Sub(r.at) < refusalLogEvery {
		r.unlogged++
		l.last[host] = r
		return false, 0, 0
	}
	if !seen && len(l.last) >= maxRefusedHosts {
		for h, r := range l.last {
			if now.Sub(r.at) >= refusalLogEvery {
				delete(l.last, h)
			}
		}
		if len(l.last) >= maxRefusedHosts {
			l.overflow++
			return false, 0, 0
		}
	}
	l.last[host] = refused{at: now}
	overflow, l.overflow = l.overflow, 0
	return true, r.unlogged, overflow
}

// HostFilter serves its handler only to requests whose Host its Hosts
// allows; any other gets 421 Misdirected Request with a short text body,
// and a warning line (see refusalLog for how often).
type HostFilter struct {
	next  http.Handler
	hosts Hosts
	log   zerolog.Logger
	now   func() time.Time
	mu    struct {
		sync.Mutex
		refusals refusalLog
	}
}

// NewHostFilter returns next behind the Host check.
func NewHostFilter(next http.Handler, hosts Hosts, log zerolog.Logger) *HostFilter {
	return &HostFilter{next: next, hosts: hosts, log: log, now: time.Now}
}

func (f *HostFilter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.hosts.Allows(r.Host) {
		f.next.ServeHTTP(w, r)
		return
	}
	host := r.Host
	if len(host) > maxLoggedHost {
		host = host[:maxLoggedHost]
	}
	f.mu.Lock()
	log, repeats, overflow := f.mu.refusals.note(host, f.now())
	f.mu.Unlock()
	if log {
		f.log.Warn().Str("host", host).Str("remote", r.RemoteAddr).Int("repeats", repeats).Int("other_hosts_unlogged", overflow).
			Msg("web console refused a request for a host it does not serve (a DNS rebinding attempt, or a name to add to " + AllowedHostsKey + ")")
	}
	http.Error(w, fmt.Sprintf("misdirected request: this console does not answer to host %q (see %s)", host, AllowedHostsKey), http.StatusMisdirectedRequest)
}
