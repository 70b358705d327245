package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Keys are the ssl.* keys Fjord acts on, broker-wide or per listener.
var Keys = []string{
	"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
	"ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.key.password",
	"ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
	"ssl.truststore.certificates", "ssl.client.auth", "ssl.principal.mapping.rules",
	"ssl.enabled.protocols", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
}

// ListenerKey splits "listener.name.<name>.<ssl key>" into the listener's
// (lower-case) name and the ssl key; ok is false for anything else.
func ListenerKey(key string) (listener, base string, ok bool) {
	rest, found := strings.CutPrefix(key, "listener.name.")
	if !found {
		return "", "", false
	}
	name, base, found := strings.Cut(rest, ".ssl.")
	if !found || name == "" {
		return "", "", false
	}
	base = "ssl." + base
	return name, base, slices.Contains(Keys, base)
}

// Settings are the ssl.* values that apply to one listener.
type Settings struct {
	Listener string
	values   map[string]string
}

// ForListener picks the settings of listener name from props (ssl.* keys
// and listener.name.<lower-case name>.ssl.* keys): a per-listener key wins
// over the broker-wide one, key by key, as Kafka reads them.
func ForListener(props map[string]string, name string) Settings {
	s := Settings{Listener: name, values: map[string]string{}}
	prefix := "listener.name." + strings.ToLower(name) + "."
	for _, k := range Keys {
		if v, ok := props[prefix+k]; ok {
			s.values[k] = v
		} else if v, ok := props[k]; ok {
			s.values[k] = v
		}
	}
	return s
}

func (s Settings) get(key, def string) string {
	if v, ok := s.values[key]; ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return def
}

// files are the store files whose changes trigger a reload.
func (s Settings) files() []string {
	var out []string
	for _, k := range []string{"ssl.keystore.location", "ssl.truststore.location"} {
		if v := s.get(k, ""); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// built is one loaded configuration.
type built struct {
	server *tls.Config
	client *tls.Config // for this node's own connections to the listener
	rules  []mappingRule
	leaf   *x509.Certificate
}

// build loads the stores and checks every setting; the error names the
// listener and the setting.
func build(s Settings) (*built, error) {
	wrap := func(err error) error { return fmt.Errorf("listener %s: %w", s.Listener, err) }
	minV, maxV, err := protocols(s.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3"))
	if err != nil {
		return nil, wrap(err)
	}
	suites, err := cipherSuites(s.get("ssl.cipher.suites", ""), maxV)
	if err != nil {
		return nil, wrap(err)
	}
	rules, err := parseMappingRules(s.get("ssl.principal.mapping.rules", "DEFAULT"))
	if err != nil {
		return nil, wrap(err)
	}
	cert, origin, err := loadKeystore(s)
	if err != nil {
		return nil, wrap(fmt.Errorf("%s: %w", origin, err))
	}
	roots, origin, err := loadTruststore(s)
	if err != nil {
		return nil, wrap(fmt.Errorf("%s: %w", origin, err))
	}
	auth := tls.NoClientCert
	switch a := strings.ToLower(s.get("ssl.client.auth", "none")); a {
	case "none":
	case "requested":
		auth = tls.VerifyClientCertIfGiven
	case "required":
		auth = tls.RequireAndVerifyClientCert
	default:
		return nil, wrap(fmt.Errorf("ssl.client.auth %q: want none, requested or required", a))
	}
	b := &built{rules: rules, leaf: cert.Leaf}
	b.server = &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   auth,
		ClientCAs:    roots,
		MinVersion:   minV,
		MaxVersion:   maxV,
		CipherSuites: suites,
	}
	if auth != tls.NoClientCert {
		// A certificate no rule maps fails the handshake, as Kafka fails
		// the authentication, rather than passing as ANONYMOUS.
		b.server.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return nil
			}
			_, err := mapPrincipal(rules, DistinguishedName(cs.PeerCertificates[0]))
			return err
		}
	}
	b.client = &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      roots,
		MinVersion:   minV,
		MaxVersion:   maxV,
		CipherSuites: suites,
	}
	switch alg := strings.ToLower(s.get("ssl.endpoint.identification.algorithm", "https")); alg {
	case "https":
	case "":
	default:
		return nil, wrap(fmt.Errorf("ssl.endpoint.identification.algorithm %q: want https or empty", alg))
	}
	if _, ok := s.values["ssl.endpoint.identification.algorithm"]; ok && s.get("ssl.endpoint.identification.algorithm", "") == "" {
		// Kafka's "" checks the chain but not the host name.
		b.client.InsecureSkipVerify = true
		b.client.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return b, nil
}

// protocols maps ssl.enabled.protocols to the range Go serves; Go serves
// a contiguous range, so a list with a gap is refused.
func protocols(v string) (uint16, uint16, error) {
	names := map[string]uint16{"TLSv1": tls.VersionTLS10, "TLSv1.1": tls.VersionTLS11, "TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}
	var got []uint16
	for p := range strings.SplitSeq(v, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		ver, ok := names[p]
		if !ok {
			return 0, 0, fmt.Errorf("ssl.enabled.protocols: %q is not served (TLSv1, TLSv1.1, TLSv1.2, TLSv1.3)", p)
		}
		got = append(got, ver)
	}
	if len(got) == 0 {
		return 0, 0, errors.New("ssl.enabled.protocols: empty")
	}
	slices.Sort(got)
	got = slices.Compact(got)
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+1 {
			return 0, 0, fmt.Errorf("ssl.enabled.protocols %q: Go serves a contiguous range of versions only", v)
		}
	}
	return got[0], got[len(got)-1], nil
}

// cipherSuites maps ssl.cipher.suites (JSSE names, which are the IANA
// names Go uses; SSL_ prefixed aliases too) to Go's ids. A name Go cannot
// honour is refused rather than dropped. Go does not let TLS 1.3 suites be
// chosen: all three are always on, so with TLSv1.3 enabled a list must
// name all three or none of them would be honoured either way.
func cipherSuites(v string, maxV uint16) ([]uint16, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	byName := map[string]uint16{}
	for _, cs := range tls.CipherSuites() {
		byName[cs.Name] = cs.ID
	}
	insecure := map[string]bool{}
	for _, cs := range tls.InsecureCipherSuites() {
		insecure[cs.Name] = true
	}
	tls13 := map[string]bool{"TLS_AES_128_GCM_SHA256": false, "TLS_AES_256_GCM_SHA384": false, "TLS_CHACHA20_POLY1305_SHA256": false}
	var out []uint16
	for n := range strings.SplitSeq(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, ok := tls13[n]; ok {
			tls13[n] = true
			continue
		}
		name := n
		if rest, ok := strings.CutPrefix(n, "SSL_"); ok {
			name = "TLS_" + rest
		}
		id, ok := byName[name]
		switch {
		case ok:
			out = append(out, id)
		case insecure[name]:
			return nil, fmt.Errorf("ssl.cipher.suites: %s is insecure and not served", n)
		default:
			return nil, fmt.Errorf("ssl.cipher.suites: %s is not a cipher suite Go's TLS serves", n)
		}
	}
	if maxV == tls.VersionTLS13 {
		var missing []string
		for n, named := range tls13 {
			if !named {
				missing = append(missing, n)
			}
		}
		slices.Sort(missing)
		if len(missing) > 0 {
			return nil, fmt.Errorf("ssl.cipher.suites: with TLSv1.3 enabled every TLS 1.3 suite is served (Go does not let them be chosen); add %s, or set ssl.enabled.protocols=TLSv1.2", strings.Join(missing, ","))
		}
	}
	if len(out) == 0 && maxV < tls.VersionTLS13 {
		return nil, errors.New("ssl.cipher.suites: no TLS 1.2 suite named")
	}
	return out, nil
}

// Source is one listener's live TLS configuration. Its files are polled
// (Watch) and a changed store replaces the configuration for new
// connections; a store that fails to load keeps the old one.
type Source struct {
	// mu guards settings, and orders a reload against a reconfiguration:
	// a store is swapped in only under mu, for the settings in force.
	mu       sync.Mutex
	settings Settings
	cur      atomic.Pointer[built]
	stamp    atomic.Value // string: the files' size and mtime when last loaded
}

// Check loads settings without serving them: whether Reconfigure would
// take them.
func Check(s Settings) error {
	_, err := build(s)
	return err
}

// Same reports whether s are the settings in force.
func (s *Source) Same(ns Settings) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Equal(s.settings.values, ns.values)
}

// Reconfigure replaces the settings (a dynamic config change, as Kafka's
// dynamic SSL reconfiguration): the new stores are loaded at once and
// serve new connections, and their files are the ones watched from now
// on. Settings that do not load change nothing.
func (s *Source) Reconfigure(ns Settings) error {
	b, err := build(ns)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settings = ns
	s.cur.Store(b)
	s.stamp.Store(stamp(ns.files()))
	return nil
}

// Load reads and checks a listener's settings once: the start-up check.
func Load(s Settings) (*Source, error) {
	b, err := build(s)
	if err != nil {
		return nil, err
	}
	src := &Source{settings: s}
	src.cur.Store(b)
	src.stamp.Store(stamp(s.files()))
	return src, nil
}

// Server is the configuration for a new inbound connection.
func (s *Source) Server() *tls.Config { return s.cur.Load().server }

// Client is the configuration for this node's own connections to a
// listener with these settings (replication): it trusts the truststore
// and presents the keystore's certificate.
func (s *Source) Client() *tls.Config { return s.cur.Load().client }

// Principal is the principal of a handshake's client certificate:
// "User:<mapped name>", or "" (ANONYMOUS) when no certificate was given.
func (s *Source) Principal(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return ""
	}
	name, err := mapPrincipal(s.cur.Load().rules, DistinguishedName(cs.PeerCertificates[0]))
	if err != nil {
		return "" // refused in the handshake already
	}
	return "User:" + name
}

// Subject is the DN of the certificate served now, for logs.
func (s *Source) Subject() string { return DistinguishedName(s.cur.Load().leaf) }

// stamp is the size and modification time of files: what Watch compares.
func stamp(files []string) string {
	var b strings.Builder
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			fmt.Fprintf(&b, "%s:missing;", f)
			continue
		}
		fmt.Fprintf(&b, "%s:%d:%d;", f, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

// Watch polls the store files every interval until ctx ends and reloads
// them when one changed: one log line per reload or failed reload.
func (s *Source) Watch(ctx context.Context, interval time.Duration, log zerolog.Logger) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	failed := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		settings := s.settings
		s.mu.Unlock()
		files := settings.files()
		if len(files) == 0 {
			continue // inline PEM: nothing to watch (until a reconfiguration names files)
		}
		st := stamp(files)
		if st == s.stamp.Load().(string) || st == failed {
			continue
		}
		b, err := build(settings)
		if err != nil {
			failed = st
			log.Error().Err(err).Msg("TLS stores changed but do not load; still serving the previous certificate")
			continue
		}
		failed = ""
		s.mu.Lock()
		if maps.Equal(s.settings.values, settings.values) { // else reconfigured meanwhile: its stores win
			s.cur.Store(b)
			s.stamp.Store(st)
		}
		s.mu.Unlock()
		log.Info().Str("subject", DistinguishedName(b.leaf)).Time("not_after", b.leaf.NotAfter).Msg("TLS stores reloaded; new connections get the new certificate")
	}
}
