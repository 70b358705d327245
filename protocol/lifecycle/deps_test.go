package lifecycle

import (
	"os/exec"
	"strings"
	"testing"
)

// The package stays a leaf: everything it builds on is the standard
// library, so every Fjord package may import it without a cycle.
func TestLeaf(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/fjordlog/fjord/protocol/lifecycle" {
			t.Errorf("lifecycle depends on %s", p)
		}
	}
}
