package recordbatch

import (
	"os/exec"
	"strings"
	"testing"
)

// The codec is a leaf: storage, the controller and the coordinators share
// it only if it depends on none of them. Its test builder (batchtest),
// which recordbatch's own tests import, must not reach them either.
func TestLeafImportsNothingOfFjord(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	for _, pkg := range []string{".", "./batchtest"} {
		out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, p := range strings.Fields(string(out)) {
			if strings.HasPrefix(p, "github.com/fjordlog/fjord/") && p != "github.com/fjordlog/fjord/storage/recordbatch" && p != "github.com/fjordlog/fjord/storage/recordbatch/batchtest" {
				t.Errorf("%s depends on %s", pkg, p)
			}
		}
	}
}
