package main

import (
	"errors"

	"github.com/fjordlog/fjord/broker/config"
)

// errHelp is returned by LoadConfig when -h or --help was given; main prints
// usage() and exits successfully.
var errHelp = errors.New("help requested")

// usage describes the command line.
func usage() string {
	return `Usage: fjord [--config PATH] [--override key=value]...
       fjord health [--brokers N] [--wait] [--timeout 60s] [--bootstrap host:port] [-X k=v]...
       fjord topic create NAME [--partitions N] [--replication-factor N] [--config k=v]...
       fjord topic list [--internal]
       fjord topic describe NAME...
       fjord topic delete NAME...
       fjord topic alter-config NAME [--set k=v]... [--delete k]...
       fjord group list
       fjord group describe GROUP...
       fjord group lag GROUP...
       fjord group reset-offsets GROUP --topic T (--to-earliest | --to-latest |
             --to-offset N | --to-datetime RFC3339 | --shift-by N) [--execute]
       fjord group delete GROUP...
       fjord produce -t TOPIC [-p PARTITION] [-k SEP]        (a record per stdin line)
       fjord consume -t TOPIC [-p PARTITION | -G GROUP] [-o beginning|end|N|-N]
             [-c COUNT] [-e] [-f '%t %p %o %k %v %T %h\n']
       fjord cluster info
       fjord broker describe-config (--entity-name ID | --entity-default) [--all]
       fjord broker alter-config (--entity-name ID | --entity-default)
             [--add-config k=v[,k2=v2]]... [--delete-config k[,k2]]...
       fjord verify [--duration 30s] [--rate 500] [--partitions 6]
             [--replication-factor N] [--keys 64] [--keep]

The client subcommands speak the Kafka protocol to any cluster, Fjord or
Kafka. Each takes --bootstrap host:port[,host:port] (also spelled -b, as
kcat does, and --bootstrap-server, as the Kafka tools do; default
$FJORD_BOOTSTRAP, else 127.0.0.1:9092), --json (JSON for scripts instead
of a table) and --timeout, and connects to a secured cluster with kcat's
-X key=value client properties (or -F/--command-config FILE of them):
security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), sasl.username,
sasl.password (or a Java client's sasl.jaas.config), ssl.ca.location,
ssl.certificate.location, ssl.key.location, ssl.key.password,
ssl.keystore.location and ssl.keystore.password (PKCS#12),
enable.ssl.certificate.verification, ssl.endpoint.identification.algorithm,
client.id; any other key is a usage error. produce lets the brokers
auto-create its topic, as kcat does. Exit status: 0 done; 1 the operation failed (an
error from the cluster, a refusal such as resetting the offsets of a
group with members, or verify finding a problem); 2 a usage error.
group lag lists every partition of the topics the group's members
subscribe to or are assigned and of those it committed to; one with no
commit (COMMITTED -) lags by every record its log holds (END - START).
group reset-offsets only prints its plan unless --execute is given.
consume -G joins the group, which shares the topic's partitions among its
members; it commits what it printed (also on SIGINT or SIGTERM, which end
it with status 0), and the next run resumes after it.

fjord verify creates a topic, produces keyed records (acks=all,
idempotent) while a consumer group processes them, reads everything back
and reports acknowledged records lost, duplicated or reordered, and the
group's commits checked against what it processed. It exits 0 only when
no problem was found (nothing lost).

fjord health exits 0 when the node serves (its listener answers and lists
it as a live broker): a container healthcheck. It reads the node's
configuration the same way (flags below, KAFKA_* environment).

Flags:
  --config PATH          read a Java properties file (server.properties style)
  --override key=value   set one configuration key; repeatable
  -h, --help             print this help

Configuration comes from, in rising priority: the built-in defaults, the
--config file, KAFKA_* environment variables (the official Kafka container
image's convention: KAFKA_LOG_RETENTION_MS=60000 sets log.retention.ms;
CLUSTER_ID sets cluster.id; Confluent's and Bitnami's KAFKA_CFG_* work too)
and --override flags. Keys use Kafka's property names. A Kafka key Fjord
has no use for is ignored with a warning; a key Kafka does not have stops
start-up.

Every key, Fjord's and Kafka's, and what Fjord does with it, is listed in
docs/configuration.md.
`
}

// configKeys is the broker's table of every key Fjord implements.
var configKeys = config.Keys()

// keyIndex maps a key name to its position in configKeys.
var keyIndex = func() map[string]int {
	m := make(map[string]int, len(configKeys))
	for i, k := range configKeys {
		m[k.Name] = i
	}
	return m
}()
