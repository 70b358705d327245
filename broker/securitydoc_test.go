package broker

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/protocol/fjordmsg"
)

var updateSecurityDoc = flag.Bool("update-security-doc", false, "rewrite the generated table of docs/security.md")

const (
	secDocBegin = "<!-- BEGIN GENERATED: go test ./broker -run TestSecurityDoc -update-security-doc -->"
	secDocEnd   = "<!-- END GENERATED -->"
)

var blastNames = []string{"0: reads metadata", "1: reads data or cluster state", "2: changes a group's progress",
	"3: writes data", "4: reshapes or reconfigures", "5: destroys data or changes who may do what"}

// securityRow is one line of the table: an API's rule on some listeners.
type securityRow struct {
	key       int16
	listeners string
	rule      api.Rule
}

// securityTable renders the registry's rules, ranked by blast radius
// (widest first), as docs/security.md shows it: a key whose CONTROLLER
// listener rule differs has a row for each.
func securityTable() string {
	var rows []securityRow
	reg := newRegistry(nil)
	for _, k := range reg.Keys() {
		a := reg.Get(k)
		var on []string
		if a.Client.Served {
			on = append(on, "client")
		}
		if a.Controller.Served && a.CtlRule == nil {
			on = append(on, "controller")
		}
		if len(on) > 0 {
			rows = append(rows, securityRow{k, strings.Join(on, ", "), a.Rule})
		}
		if a.Controller.Served && a.CtlRule != nil {
			rows = append(rows, securityRow{k, "controller", *a.CtlRule})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.rule.Blast != b.rule.Blast {
			return a.rule.Blast > b.rule.Blast
		}
		if a.key != b.key {
			return a.key < b.key
		}
		return a.listeners < b.listeners
	})
	var b strings.Builder
	b.WriteString("| Blast radius | API (key) | Listeners | ACL it needs |\n| --- | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s (%d) | %s | %s |\n", blastNames[r.rule.Blast], fjordmsg.AnyNameForKey(r.key), r.key, r.listeners, r.rule.Need)
	}
	return b.String()
}

// TestSecurityDoc keeps docs/security.md's table the table enforcement
// uses.
func TestSecurityDoc(t *testing.T) {
	checkGenerated(t, "../docs/security.md", secDocBegin, securityTable(), *updateSecurityDoc,
		"go test ./broker -run TestSecurityDoc -update-security-doc")
}

// checkGenerated checks that the section of the doc at path between begin
// and the next secDocEnd is content; with update it rewrites the section
// instead. how is the command that updates it.
func checkGenerated(t *testing.T, path, begin, content string, update bool, how string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i := strings.Index(doc, begin)
	j := -1
	if i >= 0 {
		if k := strings.Index(doc[i:], secDocEnd); k >= 0 {
			j = i + k
		}
	}
	if i < 0 || j < 0 {
		t.Fatalf("%s: no generated section %q", path, begin)
	}
	want := doc[:i+len(begin)] + "\n" + content + doc[j:]
	if want == doc {
		return
	}
	if update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date: run %s", path, how)
}
