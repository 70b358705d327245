package broker

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/storage"
)

// TestDataDirSurvivesPowerLoss: a data directory made at first start, and
// the meta.properties written in it, are there after a power loss right
// after (MemFS.CrashClone(nil): what was synced, no more). Before
// openDataDir synced log.dirs' new name in its parent, the crash image
// had no data directory at all, so a node lost its identity, and every
// partition directory made in it, with the first power cut.
func TestDataDirSurvivesPowerLoss(t *testing.T) {
	fs := storage.NewMemFS()
	cfg := config.Default()
	cfg.NodeID, cfg.ClusterID = 3, "power-cut-cluster-01"
	const dir = "/var/lib/fjord/data"
	id, err := openDataDir(fs, dir, &cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(nil)
	got, err := storage.ReadFile(crashed, dir+"/"+metaProperties)
	if err != nil {
		t.Fatalf("after a power loss: %v", err)
	}
	again, err := openDataDir(crashed, dir, &cfg, zerolog.Nop())
	if err != nil || again != id {
		t.Fatalf("after a power loss the data directory names cluster %q (%v), want %q; meta.properties:\n%s", again, err, id, got)
	}
}
