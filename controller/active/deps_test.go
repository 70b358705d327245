package active

import (
	"os/exec"
	"strings"
	"testing"
)

// deps lists every package this one builds on (go list -deps).
func deps(t *testing.T) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.Fields(string(out))
}

// Dependencies point one way (cmd → broker → controller/...): nothing
// this package builds on may import broker.
func TestNoBrokerDependency(t *testing.T) {
	for _, p := range deps(t) {
		if p == "github.com/fjordlog/fjord/broker" || strings.HasPrefix(p, "github.com/fjordlog/fjord/broker/") {
			t.Errorf("controller/active depends on %s", p)
		}
	}
}

// The controller needs Kafka's record batch codec to serve the metadata
// log, not a partition log: it builds on storage/recordbatch, the leaf,
// never on storage.
func TestNoStorageDependency(t *testing.T) {
	for _, p := range deps(t) {
		if p == "github.com/fjordlog/fjord/storage" {
			t.Errorf("controller/active depends on %s", p)
		}
	}
}
