package active

import (
	"os/exec"
	"strings"
	"testing"
)

// Dependencies point one way (cmd → broker → controller/...): nothing
// this package builds on may import broker.
func TestNoBrokerDependency(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/fjordlog/fjord/broker" || strings.HasPrefix(p, "github.com/fjordlog/fjord/broker/") {
			t.Errorf("controller/active depends on %s", p)
		}
	}
}
