package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker"
	"github.com/fjordlog/fjord/broker/config"
)

func TestHealth(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	env := []string{"KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:" + strconv.Itoa(port), "KAFKA_NODE_ID=1"}

	// Nothing listening: unhealthy, and --wait gives up at its timeout.
	var out bytes.Buffer
	if code := health([]string{"--timeout", "300ms", "--wait"}, env, &out); code != 1 {
		t.Fatalf("no node: exit %d, want 1 (%s)", code, out.String())
	}

	cfg := config.Default()
	cfg.Listeners = "PLAINTEXT://127.0.0.1:" + strconv.Itoa(port)
	cfg.LogDirs = filepath.Join(t.TempDir(), "data")
	b, err := broker.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	b.Start()
	defer b.Close()

	out.Reset()
	if code := health([]string{"--wait", "--timeout", "20s"}, env, &out); code != 0 {
		t.Fatalf("serving node: exit %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "node 1") {
		t.Fatalf("output %q", out.String())
	}
	// A cluster of one does not have three brokers.
	out.Reset()
	start := time.Now()
	if code := health([]string{"--brokers", "3", "--wait", "--timeout", "500ms"}, env, &out); code != 1 {
		t.Fatalf("--brokers 3 on one node: exit %d: %s", code, out.String())
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("--timeout not honoured")
	}
	// Another node id is not this node.
	out.Reset()
	if code := health(nil, []string{"KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:" + strconv.Itoa(port), "KAFKA_NODE_ID=7"}, &out); code != 1 ||
		!strings.Contains(out.String(), "node 7 is not among") {
		t.Fatalf("node 7 checked against node 1: exit %d: %s", code, out.String())
	}
}

// TestHealthSASL: on a SASL_PLAINTEXT client listener (apache/kafka's
// sasl_plaintext compose example: PLAIN users in the JAAS file KAFKA_OPTS
// names), `fjord health` run with the node's own environment authenticates
// as the node itself (the KafkaServer section's username and password) and
// passes; with a JAAS file whose own password is wrong it fails.
func TestHealthSASL(t *testing.T) {
	dir := t.TempDir()
	jaas := func(name, pass string) string {
		p := filepath.Join(dir, name)
		text := `KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password="` + pass + `"
    user_admin="admin-secret"
    user_alice="alice-secret";
};
`
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, bad := jaas("broker_jaas.conf", "admin-secret"), jaas("wrong_jaas.conf", "not-the-password")
	ports := make([]string, 2)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
	env := func(jaasFile string) []string {
		return []string{
			"KAFKA_NODE_ID=1",
			"KAFKA_PROCESS_ROLES=broker,controller",
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
			"KAFKA_LISTENERS=CONTROLLER://127.0.0.1:" + ports[0] + ",SASL_PLAINTEXT://127.0.0.1:" + ports[1],
			"KAFKA_ADVERTISED_LISTENERS=SASL_PLAINTEXT://127.0.0.1:" + ports[1],
			"KAFKA_CONTROLLER_QUORUM_VOTERS=1@127.0.0.1:" + ports[0],
			"KAFKA_CONTROLLER_LISTENER_NAMES=CONTROLLER",
			"KAFKA_INTER_BROKER_LISTENER_NAME=SASL_PLAINTEXT",
			"KAFKA_SASL_ENABLED_MECHANISMS=PLAIN",
			"KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL=PLAIN",
			"KAFKA_LOG_DIRS=" + filepath.Join(dir, "data"),
			"KAFKA_OPTS=-Djava.security.auth.login.config=" + jaasFile,
		}
	}
	cfg, err := LoadConfig(nil, env(good))
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	b.Start()
	defer b.Close()

	var out bytes.Buffer
	if code := health([]string{"--wait", "--timeout", "20s"}, env(good), &out); code != 0 {
		t.Fatalf("SASL node checked with its own environment: exit %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "node 1") {
		t.Fatalf("output %q", out.String())
	}
	out.Reset()
	if code := health(nil, env(bad), &out); code != 1 || !strings.Contains(out.String(), "SASL") {
		t.Fatalf("a wrong own password: exit %d, want 1 and a SASL error: %s", code, out.String())
	}
}
