package main

import (
	"bytes"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker"
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

	cfg := broker.DefaultConfig()
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
