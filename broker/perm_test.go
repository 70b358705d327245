package broker

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/storage"
)

// TestDataDirPermWarning: a data directory other users can enter (made by
// an older release, or by hand) is reported at start-up and left as it
// is; a private one is not reported.
func TestDataDirPermWarning(t *testing.T) {
	for _, c := range []struct {
		mode os.FileMode
		warn bool
	}{{0o755, true}, {0o750, true}, {0o701, true}, {0o700, false}} {
		dir := t.TempDir()
		if err := os.Chmod(dir, c.mode); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		warnOpenDataDir(storage.OSFS, dir, zerolog.New(&buf))
		if got := strings.Contains(buf.String(), `"level":"warn"`) && strings.Contains(buf.String(), "chmod 700"); got != c.warn {
			t.Errorf("mode %#o: warned %v, want %v (%s)", c.mode, got, c.warn, buf.String())
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != c.mode {
			t.Errorf("mode %#o changed to %#o", c.mode, fi.Mode().Perm())
		}
	}
}
