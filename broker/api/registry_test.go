package api

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func answer(*Conn, kmsg.Request, func(kmsg.Response)) {}

// TestNewRegistryRefuses: every invariant Entry states is enforced when a
// node's registry is built.
func TestNewRegistryRefuses(t *testing.T) {
	ok := Entry{Key: 3, Client: Versions(0, 12), Handle: answer, Rule: Needs("none", 0, NoACL)}
	for name, tc := range map[string]struct {
		es   []Entry
		want string
	}{
		"duplicate":      {[]Entry{ok, ok}, "registered twice"},
		"no listener":    {[]Entry{{Key: 3, Rule: ok.Rule}}, "served on no listener"},
		"no rule":        {[]Entry{{Key: 3, Client: ok.Client, Handle: answer}}, "no authorization rule"},
		"no need":        {[]Entry{{Key: 3, Client: ok.Client, Handle: answer, Rule: Rule{Check: NoACL}}}, "no authorization rule"},
		"no handler":     {[]Entry{{Key: 3, Client: ok.Client, Rule: ok.Rule}}, "needs a handler"},
		"stray handler":  {[]Entry{{Key: 3, Controller: ok.Client, Handle: answer, Rule: ok.Rule}}, "needs a handler"},
		"local, no hand": {[]Entry{{Key: 3, Controller: ok.Client, CtlLocal: true, Rule: ok.Rule}}, "without a handler"},
	} {
		if _, err := NewRegistry(tc.es...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	if _, err := NewRegistry(ok); err != nil {
		t.Fatal(err)
	}
}

// TestTables: the CONTROLLER listener's table serves its own ranges, and
// the SASL keys only when it authenticates with SASL.
func TestTables(t *testing.T) {
	r, err := NewRegistry(
		Entry{Key: 3, Client: Versions(0, 12), Handle: answer, Rule: Needs("none", 0, NoACL)},
		Entry{Key: 56, Controller: Versions(0, 3), Rule: Needs("none", 0, NoACL)},
		Entry{Key: SASLHandshakeKey, Client: Versions(0, 1), Controller: Versions(0, 1), CtlLocal: true, Handle: answer, Rule: Needs("none", 0, NoACL)},
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tbl     Table
		key     int16
		served  bool
		min, mx int16
	}{
		{r.ClientTable(), 3, true, 0, 12},
		{r.ClientTable(), 56, false, 0, 0},
		{r.ControllerTable(false), 56, true, 0, 3},
		{r.ControllerTable(false), 3, false, 0, 0},
		{r.ControllerTable(false), SASLHandshakeKey, false, 0, 0},
		{r.ControllerTable(true), SASLHandshakeKey, true, 0, 1},
		{r.ClientTable(), 99, false, 0, 0},
	} {
		lo, hi, ok := tc.tbl.Supported(tc.key)
		if ok != tc.served || lo != tc.min || hi != tc.mx {
			t.Errorf("%+v key %d: %d-%d %v", tc.tbl, tc.key, lo, hi, ok)
		}
	}
	if all := r.ControllerTable(true).All(); len(all) != 2 || all[0].ApiKey != SASLHandshakeKey || all[1].ApiKey != 56 {
		t.Errorf("controller table lists %v", all)
	}
}
