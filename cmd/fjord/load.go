package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/config/catalogue"
	"github.com/fjordlog/fjord/broker/sasl"
	"github.com/fjordlog/fjord/broker/tlsconf"
)

// layer is a source of settings; a higher layer wins key by key.
type layer uint8

const (
	layerImage   layer = iota // FJORD_DEFAULT_<KEY>: the image's defaults
	layerBitnami              // Bitnami's defaults, when its convention is in use
	layerFile                 // --config
	layerEnv                  // CLUSTER_ID, KAFKA_<KEY>
	layerEnvCFG               // KAFKA_CFG_<KEY> (Bitnami), over KAFKA_<KEY>
	layerFlag                 // --override
)

// setting is one key's value and where it came from, for messages:
// "path:line", "env NAME", "--override".
type setting struct {
	value, origin string
	layer         layer
}

// given reports whether a user's source (not a default layer) set the key.
func (s setting) given() bool { return s.layer >= layerFile }

// loaded is a node's configuration and what start-up says about it once
// the logger exists.
type loaded struct {
	cfg config.Config
	// static is every implemented key a source gave, for cfg.Static (kept
	// apart so that configurations compare as plain values in tests).
	static map[string]string
	// logLevel is the level the image's convention asks for (log4j's root
	// level, BITNAMI_DEBUG); "" = Fjord's default. FJORD_LOG_LEVEL wins.
	logLevel string
	// ignored lists "key (origin)" of settings with no meaning for Fjord,
	// logged together in one line.
	ignored []string
	// warnings name settings Fjord does not act on yet, one line each.
	warnings []configNote
}

// configNote is one setting start-up warns about.
type configNote struct {
	origin, key, why string
}

func (n configNote) String() string { return n.origin + ": " + n.key + ": " + n.why }

// hostname names this machine for an advertised listener with an empty
// host; a variable so tests can fix it.
var hostname = os.Hostname

// LoadConfig builds the node's configuration; see loadConfig.
func LoadConfig(args []string, environ []string) (config.Config, error) {
	l, err := loadConfig(args, environ)
	return l.cfg, err
}

// loadConfig builds the node's configuration from, in rising priority: the
// built-in defaults, the image's FJORD_DEFAULT_ variables, Bitnami's
// defaults (when KAFKA_CFG_ variables are present), a properties file
// (--config), the environment (KAFKA_<KEY>, then KAFKA_CFG_<KEY>) and
// --override flags. Keys Fjord implements are applied; other keys of
// Kafka's catalogue are ignored, warned about or refused (package
// catalogue); any other key is an error naming the nearest real one.
func loadConfig(args []string, environ []string) (loaded, error) {
	var out loaded
	configPath, overrides, err := parseArgs(args)
	if err != nil {
		if errors.Is(err, errHelp) {
			return out, errHelp
		}
		return out, fmt.Errorf("config: %w", err)
	}

	settings := make(map[string]setting)
	var errs []error
	var jaasFile string // KAFKA_OPTS -Djava.security.auth.login.config
	put := func(key, value, origin string, l layer) {
		if prev, ok := settings[key]; ok && prev.layer > l {
			return
		}
		settings[key] = setting{value: strings.TrimSpace(value), origin: origin, layer: l}
	}
	env := make([][2]string, 0, len(environ))
	bitnami := false
	for _, kv := range environ {
		if name, value, ok := strings.Cut(kv, "="); ok {
			env = append(env, [2]string{name, value})
			bitnami = bitnami || strings.HasPrefix(name, "KAFKA_CFG_")
		}
	}

	// 1. Defaults of the image, and Bitnami's.
	for _, e := range env {
		if strings.HasPrefix(e[0], "FJORD_DEFAULT_") {
			put(envToKey(e[0]), e[1], "env "+e[0], layerImage)
		}
	}
	if bitnami {
		put("log.dirs", "/bitnami/kafka/data", "Bitnami's default (KAFKA_CFG_ variables are set)", layerBitnami)
	}

	// 2. Properties file.
	if configPath != "" {
		data, err := os.ReadFile(configPath)
		if err != nil {
			return out, fmt.Errorf("config: %w", err)
		}
		props, err := parseProperties(string(data))
		if err != nil {
			return out, fmt.Errorf("config: %s:%w", configPath, err)
		}
		for _, p := range props {
			put(p.key, p.value, fmt.Sprintf("%s:%d", configPath, p.line), layerFile)
		}
	}

	// 3. Environment. CLUSTER_ID first so that KAFKA_CLUSTER_ID wins.
	for _, e := range env {
		if e[0] == "CLUSTER_ID" {
			put("cluster.id", e[1], "env CLUSTER_ID", layerEnv)
		}
	}
	for _, e := range env {
		name, value := e[0], e[1]
		if !strings.HasPrefix(name, "KAFKA_") {
			continue
		}
		v, ok := classifyEnv(name, value)
		if !ok {
			l := layerEnv
			if strings.HasPrefix(name, "KAFKA_CFG_") {
				l = layerEnvCFG
			}
			put(envToKey(name), value, "env "+name, l)
			continue
		}
		switch v.kind {
		case envIgnored:
			out.ignored = append(out.ignored, name)
		case envUnsupported:
			out.warnings = append(out.warnings, configNote{"env " + name, name, v.why})
		case envClusterID:
			put("cluster.id", value, "env "+name, layerEnv)
		case envLogLevel:
			if lvl, ok := log4jLevel(value); ok {
				out.logLevel = lvl
			} else {
				errs = append(errs, fmt.Errorf("env %s: %q is not a log4j level (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF)", name, value))
			}
		case envKafkaOpts:
			for _, o := range parseKafkaOpts(value) {
				if o.prop == "java.security.auth.login.config" {
					jaasFile = o.value
					continue
				}
				out.ignored = append(out.ignored, "KAFKA_OPTS "+o.word)
			}
		case envSecretFile:
			put(secretEnv[name], filepath.Join(secretsDir(env), strings.TrimSpace(value)), "env "+name, layerEnvCFG)
		case envSecretCredentials:
			path := filepath.Join(secretsDir(env), strings.TrimSpace(value))
			data, err := os.ReadFile(path)
			if err != nil {
				errs = append(errs, fmt.Errorf("env %s: the credentials file: %w", name, err))
				continue
			}
			put(secretEnv[name], strings.TrimRight(string(data), "\r\n"), "env "+name+" ("+path+")", layerEnvCFG)
		case envEnableKRaft:
			if strings.EqualFold(strings.TrimSpace(value), "no") || strings.EqualFold(strings.TrimSpace(value), "false") {
				out.warnings = append(out.warnings, configNote{"env " + name, name + "=" + value, "ZooKeeper mode does not exist in Fjord; the node runs its own KRaft quorum"})
			}
		}
	}
	for _, e := range env {
		if e[0] == "BITNAMI_DEBUG" && strings.EqualFold(strings.TrimSpace(e[1]), "true") && out.logLevel == "" {
			out.logLevel = "debug"
		}
	}

	// 4. Flags.
	for _, o := range overrides {
		k, v, _ := strings.Cut(o, "=")
		put(strings.TrimSpace(k), v, "--override", layerFlag)
	}

	// The SASL keys that hold passwords or name a listener are kept apart
	// from the key table, so DescribeConfigs never reports them.
	saslSettings := takeSASLSettings(settings)
	saslSettings.JAASFile = jaasFile

	// Judge the keys Fjord does not implement against Kafka's catalogue.
	keys := mapsKeys(settings)
	slices.Sort(keys)
	for _, key := range keys {
		s := settings[key]
		if _, ok := keyIndex[key]; ok {
			continue
		}
		if _, _, ok := tlsconf.ListenerKey(key); ok {
			continue // a listener's own ssl.* value, applied below
		}
		delete(settings, key)
		v, known := catalogue.Classify(catalogue.Broker, key, s.value)
		switch {
		case !known:
			hint := "supported keys: docs/configuration.md"
			if near := nearestKey(key); near != "" {
				hint = fmt.Sprintf("did you mean %q? %s", near, hint)
			}
			errs = append(errs, fmt.Errorf("%s: unknown configuration key %q (%s)", s.origin, key, hint))
		case v.Class != catalogue.Refused && checkKafkaValue(key, s.value) != nil:
			errs = append(errs, fmt.Errorf("%s: %s: %w", s.origin, key, checkKafkaValue(key, s.value)))
		case v.Class == catalogue.Refused:
			errs = append(errs, fmt.Errorf("%s: %s=%s: %s", s.origin, key, s.value, v.Why))
		case v.Class == catalogue.Unsupported:
			out.warnings = append(out.warnings, configNote{s.origin, key, v.Why})
		default:
			out.ignored = append(out.ignored, key)
		}
	}

	// node.id and broker.id name the same thing; Kafka refuses different values.
	if n, ok := settings["node.id"]; ok {
		if b, ok := settings["broker.id"]; ok {
			nv, err1 := strconv.ParseInt(n.value, 10, 32)
			bv, err2 := strconv.ParseInt(b.value, 10, 32)
			if err1 == nil && err2 == nil && nv != bv {
				errs = append(errs, fmt.Errorf("node.id %d (%s) and broker.id %d (%s) differ; set only node.id", nv, n.origin, bv, b.origin))
			}
		}
	}

	// Apply the final value of every key given, lowest prio first so that
	// e.g. log.retention.ms overrides .hours whichever source each came from.
	order := make([]int, len(configKeys))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return configKeys[a].Prio - configKeys[b].Prio })
	cfg := config.Default()
	out.static = map[string]string{}
	for _, i := range order {
		k := configKeys[i]
		s, ok := settings[k.Name]
		if !ok {
			continue
		}
		// The image's own defaults count as static too: they are what its
		// server.properties would hold.
		out.static[k.Name] = strings.TrimSpace(s.value)
		if err := k.Set(&cfg, s.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", s.origin, k.Name, err))
		}
	}

	for _, key := range keys {
		if _, _, ok := tlsconf.ListenerKey(key); ok {
			cfg.SetListenerSSL(key, settings[key].value)
		}
	}

	// As in the official image: listeners defaults to advertised.listeners
	// with every host replaced by 0.0.0.0.
	if adv, ok := settings["advertised.listeners"]; ok && adv.given() && adv.value != "" {
		if ls, ok := settings["listeners"]; !ok || !ls.given() {
			if ls, err := config.ParseListeners(cfg.AdvertisedListeners); err == nil {
				parts := make([]string, len(ls))
				for i, l := range ls {
					parts[i] = l.Name + "://" + net.JoinHostPort("0.0.0.0", strconv.Itoa(int(l.Port)))
				}
				cfg.Listeners = strings.Join(parts, ",")
			} // else Validate reports advertised.listeners
		}
	}
	// As Kafka does, an advertised listener with no host advertises this
	// machine's name (a container's host name, which its compose network
	// resolves).
	if adv, err := advertiseHostname(cfg.AdvertisedListeners); err != nil {
		errs = append(errs, err)
	} else {
		cfg.AdvertisedListeners = adv
	}
	saslSettings.EnabledMechanisms, saslSettings.InterBrokerMechanism, saslSettings.ReauthMs = cfg.SASL.EnabledMechanisms, cfg.SASL.InterBrokerMechanism, cfg.SASL.ReauthMs
	saslSettings.ControllerMechanism = cfg.SASL.ControllerMechanism
	saslSettings.OAuth = cfg.SASL.OAuth // the key table's (broker/config/keys_oauth.go)
	cfg.SASL = saslSettings
	if err := checkSecurityProtocols(cfg, settings["listener.security.protocol.map"]); err != nil {
		errs = append(errs, err)
	}
	if err := checkQuorumBootstrap(cfg, settings); err != nil {
		errs = append(errs, err)
	}

	if len(errs) > 0 {
		return out, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	if zeroConfig(configPath, overrides, env) {
		// A developer's bare `fjord`: the console is one click away.
		// Any configuration source means a deliberate set-up, where a
		// listener showing record contents must be asked for.
		cfg.ConsoleAddr = config.DevConsoleAddr
	}
	if err := cfg.Validate(); err != nil {
		return out, fmt.Errorf("config: %w", err)
	}
	out.cfg = cfg
	return out, nil
}

// zeroConfig reports whether no configuration source was given: no
// --config, no --override, and none of the environment variables that
// configure a node (KAFKA_*, CLUSTER_ID, FJORD_DEFAULT_*).
func zeroConfig(configPath string, overrides []string, env [][2]string) bool {
	if configPath != "" || len(overrides) > 0 {
		return false
	}
	for _, e := range env {
		if strings.HasPrefix(e[0], "KAFKA_") || strings.HasPrefix(e[0], "FJORD_DEFAULT_") || e[0] == "CLUSTER_ID" {
			return false
		}
	}
	return true
}

// checkKafkaValue checks a value against the type Kafka gives its key.
func checkKafkaValue(key, value string) error {
	k, ok := catalogue.Lookup(catalogue.Broker, key)
	if !ok {
		return nil
	}
	return catalogue.CheckValue(k, value)
}

func mapsKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// advertiseHostname fills the empty hosts of advertised listeners with
// this machine's name.
func advertiseHostname(adv string) (string, error) {
	if adv == "" {
		return "", nil
	}
	ls, err := config.ParseListeners(adv)
	if err != nil || !slices.ContainsFunc(ls, func(l config.Listener) bool { return l.Host == "" }) {
		return adv, nil // Validate reports a bad value
	}
	name, err := hostname()
	if err != nil || name == "" {
		return "", fmt.Errorf("advertised.listeners %q: a listener has no host and the host name is unknown (%v)", adv, err)
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		if l.Host == "" {
			l.Host = name
		}
		parts[i] = l.Name + "://" + net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
	}
	return strings.Join(parts, ","), nil
}

// checkSecurityProtocols refuses a listener Fjord cannot serve as its
// security protocol asks: a SASL listener (a client, inter-broker or
// controller one) whose mechanisms or users cannot be served. Serving such
// clients in plain text would look secure and not be. The map itself must
// parse; a listener's protocol is config.Config.ListenerProtocol's.
func checkSecurityProtocols(cfg config.Config, m setting) error {
	if _, err := config.ParseProtocolMap(m.value); err != nil {
		return fmt.Errorf("%s: listener.security.protocol.map: %w", m.origin, err)
	}
	var names []string
	for _, s := range []string{cfg.Listeners, cfg.AdvertisedListeners} {
		ls, _ := config.ParseListeners(s) // Validate reports a bad value
		for _, l := range ls {
			if !slices.Contains(names, l.Name) {
				names = append(names, l.Name)
			}
		}
	}
	var errs []error
	for _, n := range names {
		switch proto := cfg.ListenerProtocol(n); {
		case proto == "SASL_PLAINTEXT" || proto == "SASL_SSL":
			// Served with SASL: its mechanisms and users must be servable.
			if _, err := sasl.NewServer(cfg.SASL, n, noScram, sasl.Hooks{}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// checkQuorumBootstrap accepts KIP-853's controller.quorum.bootstrap.servers
// in the one form Fjord can serve without dynamic quorums: no voters given,
// and a single server that is this controller's own listener (a quorum of
// one, which is what Bitnami's single-node files describe). Anything else
// would silently start a different cluster than the one asked for.
func checkQuorumBootstrap(cfg config.Config, settings map[string]setting) error {
	bs, ok := settings["controller.quorum.bootstrap.servers"]
	if !ok || bs.value == "" {
		return nil
	}
	if v, ok := settings["controller.quorum.voters"]; ok && v.value != "" {
		return nil // the voters are given: bootstrap servers are not needed
	}
	servers := strings.Split(bs.value, ",")
	refuse := fmt.Errorf("%s: controller.quorum.bootstrap.servers %q: dynamic quorums (KIP-853) are not built; list the voters in controller.quorum.voters as id@host:port", bs.origin, bs.value)
	if len(servers) != 1 || !cfg.HasRole("controller") {
		return refuse
	}
	_, port, err := net.SplitHostPort(strings.TrimSpace(servers[0]))
	if err != nil {
		return fmt.Errorf("%s: controller.quorum.bootstrap.servers %q: %w", bs.origin, bs.value, err)
	}
	ls, _ := config.ParseListeners(cfg.Listeners)
	for _, l := range ls {
		if cfg.IsControllerListener(l.Name) && strconv.Itoa(int(l.Port)) == port {
			return nil
		}
	}
	return refuse
}

// overrideList collects repeated --override key=value flags.
type overrideList []string

func (o *overrideList) String() string { return strings.Join(*o, " ") }

func (o *overrideList) Set(s string) error {
	if k, _, ok := strings.Cut(s, "="); !ok || strings.TrimSpace(k) == "" {
		return errors.New("want key=value")
	}
	*o = append(*o, s)
	return nil
}

// parseArgs reads the command line.
func parseArgs(args []string) (configPath string, overrides []string, err error) {
	fs := flag.NewFlagSet("fjord", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&configPath, "config", "", "")
	var ov overrideList
	fs.Var(&ov, "override", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", nil, errHelp
		}
		return "", nil, err
	}
	if fs.NArg() > 0 {
		return "", nil, fmt.Errorf("unexpected argument %q (a properties file is given with --config PATH)", fs.Arg(0))
	}
	configSet := false
	fs.Visit(func(f *flag.Flag) { configSet = configSet || f.Name == "config" })
	if configSet && configPath == "" {
		return "", nil, errors.New("--config: empty path")
	}
	return configPath, ov, nil
}

// nearestKey is the key, Fjord's or Kafka's, closest to an unknown one, if
// it is close enough to be a typo (an edit distance of at most a fifth of
// its length, and at least one edit); "" otherwise.
func nearestKey(key string) string {
	limit := max(len(key)/5, 1)
	best, bestD := "", limit+1
	for _, k := range suggestable() { // sorted: ties go to the first
		if d := editDistance(key, k, bestD); d < bestD {
			best, bestD = k, d
		}
	}
	if bestD > limit {
		return ""
	}
	return best
}

// suggestable lists, sorted, every key a typo may have meant: Fjord's and
// Kafka's documented broker keys.
func suggestable() []string {
	names := mapsKeys(keyIndex)
	for _, k := range catalogue.Keys(catalogue.Broker) {
		if !k.Internal {
			names = append(names, k.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// editDistance is the Levenshtein distance of a and b, or anything >=
// limit once it is known to reach limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
