package broker

import (
	"os/exec"
	"strings"
	"testing"
)

// The broker reaches the quorum member only through controller/active
// (which constructs it) and its own interfaces (metadataLog,
// activeController), never by importing controller/node.
func TestNoDirectNodeImport(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(gobin, "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/fjordlog/fjord/controller/node" {
			t.Errorf("broker imports %s", p)
		}
	}
}
