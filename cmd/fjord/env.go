package main

import (
	"regexp"
	"strings"
)

// The environment conventions of the Kafka images people run, so that their
// compose files start with only the image swapped:
//
//   - apache/kafka: KAFKA_<KEY> is a property (see envToKey), CLUSTER_ID the
//     cluster id.
//   - confluentinc/cp-kafka and cp-server: the same, plus KAFKA_BROKER_ID
//     (broker.id, an alias of node.id), KAFKA_JMX_*, KAFKA_HEAP_OPTS and
//     KAFKA_LOG4J_ROOT_LOGLEVEL (Fjord's log level). CONFLUENT_* variables
//     configure Confluent's own components and are not read.
//   - bitnami/kafka: KAFKA_CFG_<KEY> is a property and wins over KAFKA_<KEY>;
//     the image's own variables (KAFKA_KRAFT_CLUSTER_ID, KAFKA_ENABLE_KRAFT,
//     KAFKA_CLIENT_USERS, ...) are not properties. When any KAFKA_CFG_
//     variable is set, log.dirs defaults to Bitnami's /bitnami/kafka/data,
//     where its compose files mount their volume.
//   - Fjord's own image sets its defaults as FJORD_DEFAULT_<KEY>, below every
//     other source, so they never shadow a user's setting (a listener
//     derived from advertised.listeners, Bitnami's data directory).
//
// A variable that is none of these and does not convert to a known key
// stops start-up, as a typo in a file does.

// envKind is what an image variable that is not a property means.
type envKind uint8

const (
	envIgnored           envKind = iota + 1 // JVM and image plumbing: listed once at start-up
	envUnsupported                          // means something Fjord does not do yet: a warning each
	envClusterID                            // sets cluster.id
	envLogLevel                             // a log4j level: Fjord's log level
	envKafkaOpts                            // JVM options; -D system properties are read
	envEnableKRaft                          // Bitnami: "no" asks for ZooKeeper mode
	envSecretFile                           // apache/kafka: a store's file name under the secrets directory
	envSecretCredentials                    // apache/kafka: a file there holding a password
)

type envVar struct {
	kind envKind
	why  string
}

const (
	whyJVMEnv       = "configures Kafka's JVM or the image's scripts"
	whySecurityEnv  = "Bitnami's own SASL and TLS variables are not read: give TLS settings as ssl.* keys (KAFKA_CFG_SSL_*); SASL is not built yet"
	whyK8sService   = "a Kubernetes service link, not configuration"
	whyDynamicQuota = "KIP-853 dynamic quorums are not built; controller.quorum.voters lists the voters"
)

// imageEnv lists, by exact name, the variables images use for other things
// than properties.
var imageEnv = map[string]envVar{
	// Every image.
	"KAFKA_HEAP_OPTS":            {envIgnored, whyJVMEnv},
	"KAFKA_OPTS":                 {envKafkaOpts, ""},
	"KAFKA_JVM_PERFORMANCE_OPTS": {envIgnored, whyJVMEnv},
	"KAFKA_GC_LOG_OPTS":          {envIgnored, whyJVMEnv},
	"KAFKA_DEBUG":                {envIgnored, whyJVMEnv},
	"KAFKA_VERSION":              {envIgnored, whyJVMEnv},
	"KAFKA_HOME":                 {envIgnored, whyJVMEnv},
	"KAFKA_LOG4J_ROOT_LOGLEVEL":  {envLogLevel, ""},

	// apache/kafka's (and Confluent's) TLS convention (secretEnv).
	"KAFKA_SSL_KEYSTORE_FILENAME":      {envSecretFile, ""},
	"KAFKA_SSL_KEYSTORE_CREDENTIALS":   {envSecretCredentials, ""},
	"KAFKA_SSL_KEY_CREDENTIALS":        {envSecretCredentials, ""},
	"KAFKA_SSL_TRUSTSTORE_FILENAME":    {envSecretFile, ""},
	"KAFKA_SSL_TRUSTSTORE_CREDENTIALS": {envSecretCredentials, ""},

	// Bitnami's image variables.
	"KAFKA_KRAFT_CLUSTER_ID":            {envClusterID, ""},
	"KAFKA_ENABLE_KRAFT":                {envEnableKRaft, ""},
	"KAFKA_MOUNTED_CONF_DIR":            {envIgnored, whyJVMEnv},
	"KAFKA_SKIP_KRAFT_STORAGE_INIT":     {envIgnored, "Fjord formats its data directory itself on first start"},
	"KAFKA_INITSCRIPTS_DIR":             {envIgnored, whyJVMEnv},
	"KAFKA_CONF_FILE":                   {envIgnored, whyJVMEnv},
	"KAFKA_CLIENT_LISTENER_NAME":        {envIgnored, whyJVMEnv},
	"KAFKA_INITIAL_CONTROLLERS":         {envUnsupported, whyDynamicQuota},
	"KAFKA_CLIENT_USERS":                {envUnsupported, whySecurityEnv},
	"KAFKA_CLIENT_PASSWORDS":            {envUnsupported, whySecurityEnv},
	"KAFKA_INTER_BROKER_USER":           {envUnsupported, whySecurityEnv},
	"KAFKA_INTER_BROKER_PASSWORD":       {envUnsupported, whySecurityEnv},
	"KAFKA_CONTROLLER_USER":             {envUnsupported, whySecurityEnv},
	"KAFKA_CONTROLLER_PASSWORD":         {envUnsupported, whySecurityEnv},
	"KAFKA_CERTIFICATE_PASSWORD":        {envUnsupported, whySecurityEnv},
	"KAFKA_TLS_TYPE":                    {envUnsupported, whySecurityEnv},
	"KAFKA_TLS_CLIENT_AUTH":             {envUnsupported, whySecurityEnv},
	"KAFKA_TLS_TRUSTSTORE_FILE":         {envUnsupported, whySecurityEnv},
	"KAFKA_KRAFT_BOOTSTRAP_SCRAM_USERS": {envUnsupported, whySecurityEnv},
}

// secretEnv maps apache/kafka's TLS variables to the property each sets:
// a *_FILENAME names a store file in the secrets directory, a
// *_CREDENTIALS a file there whose content (without the trailing newline,
// as the image's $(cat ...) strips it) is the password. As in the image's
// script, they win over the same property given directly.
var secretEnv = map[string]string{
	"KAFKA_SSL_KEYSTORE_FILENAME":      "ssl.keystore.location",
	"KAFKA_SSL_KEYSTORE_CREDENTIALS":   "ssl.keystore.password",
	"KAFKA_SSL_KEY_CREDENTIALS":        "ssl.key.password",
	"KAFKA_SSL_TRUSTSTORE_FILENAME":    "ssl.truststore.location",
	"KAFKA_SSL_TRUSTSTORE_CREDENTIALS": "ssl.truststore.password",
}

// secretsDir is where the image mounts its secrets; FJORD_SECRETS_DIR
// moves it (for runs outside a container).
func secretsDir(env [][2]string) string {
	for _, e := range env {
		if e[0] == "FJORD_SECRETS_DIR" && e[1] != "" {
			return e[1]
		}
	}
	return "/etc/kafka/secrets"
}

// imageEnvPrefix lists families of image variables by prefix.
var imageEnvPrefix = []struct {
	prefix string
	v      envVar
}{
	{"KAFKA_JMX_", envVar{envIgnored, "JMX; Fjord serves Prometheus metrics itself (fjord.metrics.listener)"}},
	{"KAFKA_LOG4J_", envVar{envIgnored, "log4j; Fjord's log level comes from KAFKA_LOG4J_ROOT_LOGLEVEL or FJORD_LOG_LEVEL"}},
	{"KAFKA_TOOLS_LOG4J_", envVar{envIgnored, "log4j of the image's command-line tools"}},
	// Bitnami's ZooKeeper client settings (KAFKA_ZOOKEEPER_PROTOCOL, ...);
	// zookeeper.connect and friends are ignored as properties too.
	{"KAFKA_ZOOKEEPER_", envVar{envIgnored, "ZooKeeper: Fjord keeps its metadata in its own KRaft quorum"}},
}

// k8sServiceLink matches the variables Kubernetes injects for a Service
// named kafka: KAFKA_SERVICE_HOST, KAFKA_SERVICE_PORT[_NAME],
// KAFKA_PORT_9092_TCP[_ADDR|_PORT|_PROTO], and KAFKA_PORT=tcp://... (a
// KAFKA_PORT holding a plain number is Kafka's removed `port` key instead).
var k8sServiceLink = regexp.MustCompile(`^KAFKA_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT_[0-9]+_(TCP|UDP|SCTP)(_ADDR|_PORT|_PROTO)?)$`)

// classifyEnv says what an environment variable that is not a property
// means; ok is false for a property (or a variable that is not Kafka's).
func classifyEnv(name, value string) (envVar, bool) {
	if v, ok := imageEnv[name]; ok {
		return v, true
	}
	if strings.HasPrefix(name, "KAFKA_CFG_") {
		return envVar{}, false
	}
	for _, p := range imageEnvPrefix {
		if strings.HasPrefix(name, p.prefix) {
			return p.v, true
		}
	}
	if k8sServiceLink.MatchString(name) ||
		(name == "KAFKA_PORT" && strings.Contains(value, "://")) {
		return envVar{envIgnored, whyK8sService}, true
	}
	return envVar{}, false
}

// envToKey converts a KAFKA_ (or KAFKA_CFG_, FJORD_DEFAULT_) environment
// variable name to a property name as the official image does: drop the
// prefix, lower-case, then ___ -> '-', __ -> '_', _ -> '.'.
func envToKey(name string) string {
	s := name
	for _, p := range []string{"KAFKA_CFG_", "FJORD_DEFAULT_", "KAFKA_"} {
		if t, ok := strings.CutPrefix(s, p); ok {
			s = t
			break
		}
	}
	s = strings.ToLower(s)
	s = strings.ReplaceAll(s, "___", "\x00")
	s = strings.ReplaceAll(s, "__", "\x01")
	s = strings.ReplaceAll(s, "_", ".")
	s = strings.ReplaceAll(s, "\x00", "-")
	return strings.ReplaceAll(s, "\x01", "_")
}

// log4jLevel maps a log4j level name to zerolog's; ok is false for a name
// log4j does not have.
func log4jLevel(v string) (string, bool) {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "ALL", "TRACE":
		return "trace", true
	case "DEBUG":
		return "debug", true
	case "INFO":
		return "info", true
	case "WARN":
		return "warn", true
	case "ERROR":
		return "error", true
	case "FATAL":
		return "fatal", true
	case "OFF":
		return "disabled", true
	}
	return "", false
}

// jvmOption is one word of KAFKA_OPTS.
type jvmOption struct {
	word string
	// prop and value are set for a -Dprop=value system property.
	prop, value string
}

// parseKafkaOpts splits KAFKA_OPTS as a shell would for plain words and
// simple quotes (the image passes it unquoted to the JVM).
func parseKafkaOpts(s string) []jvmOption {
	var out []jvmOption
	for _, w := range splitWords(s) {
		o := jvmOption{word: w}
		if rest, ok := strings.CutPrefix(w, "-D"); ok {
			o.prop, o.value, _ = strings.Cut(rest, "=")
		}
		out = append(out, o)
	}
	return out
}

func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}
