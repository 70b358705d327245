package main

import (
	"errors"

	"github.com/fjordlog/fjord/broker"
)

// errHelp is returned by LoadConfig when -h or --help was given; main prints
// usage() and exits successfully.
var errHelp = errors.New("help requested")

// usage describes the command line.
func usage() string {
	return `Usage: fjord [--config PATH] [--override key=value]...
       fjord health [--brokers N] [--wait] [--timeout 60s] [--bootstrap host:port]

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
var configKeys = broker.ConfigKeys()

// keyIndex maps a key name to its position in configKeys.
var keyIndex = func() map[string]int {
	m := make(map[string]int, len(configKeys))
	for i, k := range configKeys {
		m[k.Name] = i
	}
	return m
}()
