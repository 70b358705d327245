package replicamgr

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/controller"
)

// metadataDir is the broker's name for the metadata log's directory.
const metadataDir = "__cluster_metadata-0"

// TestRemoveStrays: after a restart, partition directories the image no
// longer places here (moved away, topic deleted) go; everything else stays.
func TestRemoveStrays(t *testing.T) {
	dir := t.TempDir()
	tid := [16]byte{1}
	img := new(controller.Image)
	idx := uint64(0)
	apply := func(b controller.Body) {
		t.Helper()
		idx++
		next, err := img.Apply(idx, controller.NewRecord(b))
		if err != nil {
			t.Fatal(err)
		}
		img = next
	}
	for id := int32(1); id <= 3; id++ {
		apply(controller.RegisterBroker{ID: id})
	}
	apply(controller.CreateTopic{Name: "t", ID: tid})
	apply(controller.CreatePartition{TopicID: tid, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	apply(controller.CreatePartition{TopicID: tid, Partition: 1, Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 2})

	mk := func(name string, meta bool) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if meta {
			os.WriteFile(filepath.Join(p, "partition.metadata"), []byte("version: 0\n"), 0o644)
		}
		os.WriteFile(filepath.Join(p, "00000000000000000000.log"), []byte("x"), 0o644)
		return p
	}
	keep := []string{
		mk("t-0", true),       // placed here
		mk("claimed-0", true), // a replica (or its deletion) owns it
		mk("plain-0", false),  // not a partition directory Fjord wrote
		mk(metadataDir, true), // the metadata log (Config.MetadataDir)
		mk("t-x", true),       // not <topic>-<partition>
	}
	gone := []string{
		mk("t-1", true),   // moved away: placed on 2 and 3 only
		mk("t-7", true),   // a partition the topic does not have
		mk("old-0", true), // topic deleted
	}
	var wg sync.WaitGroup
	m := New(context.Background(), Config{NodeID: 1, LogDir: dir, MetadataDir: metadataDir, Logger: zerolog.Nop(),
		Go: func(fn func()) bool {
			wg.Go(fn)
			return true
		}})
	m.replicas.dirs[filepath.Join(dir, "claimed-0")] = &dirClaim{dir: filepath.Join(dir, "claimed-0"), released: make(chan struct{})}
	m.removeStrays(img)
	wg.Wait()
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	for _, p := range gone {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s kept (%v)", p, err)
		}
		if _, err := os.Stat(p + ".fjord-delete"); !os.IsNotExist(err) {
			t.Errorf("%s.fjord-delete left (%v)", p, err)
		}
	}
	if len(m.replicas.dirs) != 1 {
		t.Errorf("claims left: %v", m.replicas.dirs)
	}
}
