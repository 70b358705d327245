package broker

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// goList runs go list with the given arguments in this package's
// directory and returns the words it prints.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(gobin, append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// The broker reaches the quorum member only through controller/active
// (which constructs it) and its own interfaces (ctllink.MetadataLog,
// activeController), never by importing controller/node.
func TestNoDirectNodeImport(t *testing.T) {
	if slices.Contains(goList(t, "-f", `{{join .Imports "\n"}}`, "."), "github.com/fjordlog/fjord/controller/node") {
		t.Error("broker imports controller/node")
	}
}

// Dependencies go one way: broker imports its subpackages, which reach
// the broker only through the interfaces they declare (replica.Host,
// coordinator.Host …), never by importing it.
func TestSubpackagesDoNotImportBroker(t *testing.T) {
	for _, pkg := range []string{"./coordinator", "./partitions", "./replica", "./replicamgr", "./txn", "./console", "./httpserve", "./metrics", "./ctllink", "./config"} {
		if slices.Contains(goList(t, "-deps", pkg), "github.com/fjordlog/fjord/broker") {
			t.Errorf("%s imports the broker", pkg)
		}
	}
}
