package broker

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestNodeLevelsAreTheirOwn: two nodes of one process, from one logger;
// one node's level changed at run time changes nothing for the other, and
// the process's global level is untouched.
func TestNodeLevelsAreTheirOwn(t *testing.T) {
	var out bytes.Buffer
	base := zerolog.New(&out).Level(zerolog.InfoLevel)
	global := zerolog.GlobalLevel()
	var la, lb nodeLevel
	a, b := nodeLogger(base, &la), nodeLogger(base, &lb)
	child := a.With().Str("topic", "t").Logger() // derived loggers follow the node's level
	a.Debug().Msg("a-before")
	la.set(zerolog.DebugLevel)
	child.Debug().Msg("a-child-after")
	b.Debug().Msg("b-after")
	b.Info().Msg("b-info")
	got := out.String()
	for want, present := range map[string]bool{"a-before": false, "a-child-after": true, "b-after": false, "b-info": true} {
		if strings.Contains(got, want) != present {
			t.Errorf("%q logged: %v, want %v\n%s", want, !present, present, got)
		}
	}
	if zerolog.GlobalLevel() != global {
		t.Errorf("the global level changed: %v -> %v", global, zerolog.GlobalLevel())
	}
}
