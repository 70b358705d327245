package broker

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var updateSecurityDoc = flag.Bool("update-security-doc", false, "rewrite the generated table of docs/security.md")

const (
	secDocBegin = "<!-- BEGIN GENERATED: go test ./broker -run TestSecurityDoc -update-security-doc -->"
	secDocEnd   = "<!-- END GENERATED -->"
)

var blastNames = []string{"0: reads metadata", "1: reads data or cluster state", "2: changes a group's progress",
	"3: writes data", "4: reshapes or reconfigures", "5: destroys data or changes who may do what"}

// securityTable renders authzRules, ranked by blast radius (widest
// first), as docs/security.md shows it.
func securityTable() string {
	keys := make([]int16, 0, len(authzRules))
	for k := range authzRules {
		if _, served := apis[k]; served {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := authzRules[keys[i]], authzRules[keys[j]]
		if a.blast != b.blast {
			return a.blast > b.blast
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	b.WriteString("| Blast radius | API (key) | ACL it needs |\n| --- | --- | --- |\n")
	for _, k := range keys {
		r := authzRules[k]
		fmt.Fprintf(&b, "| %s | %s (%d) | %s |\n", blastNames[r.blast], kmsg.NameForKey(k), k, r.need)
	}
	return b.String()
}

// TestSecurityDoc keeps docs/security.md's table the table enforcement
// uses.
func TestSecurityDoc(t *testing.T) {
	const path = "../docs/security.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, secDocBegin), strings.Index(doc, secDocEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: no generated section", path)
	}
	want := doc[:i+len(secDocBegin)] + "\n" + securityTable() + doc[j:]
	if want == doc {
		return
	}
	if *updateSecurityDoc {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date: run go test ./broker -run TestSecurityDoc -update-security-doc", path)
}
