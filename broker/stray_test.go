package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/controller"
)

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
		mk(metadataDir, true), // the metadata log
		mk("t-x", true),       // not <topic>-<partition>
	}
	gone := []string{
		mk("t-1", true),   // moved away: placed on 2 and 3 only
		mk("t-7", true),   // a partition the topic does not have
		mk("old-0", true), // topic deleted
	}
	b := &Broker{logDir: dir, log: zerolog.Nop()}
	b.cfg.NodeID = 1
	b.replicas.live = map[*replica.Partition]*dirClaim{}
	b.replicas.dirs = map[string]*dirClaim{filepath.Join(dir, "claimed-0"): {dir: filepath.Join(dir, "claimed-0"), released: make(chan struct{})}}
	b.removeStrays(img)
	b.tasks.Stop()
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
	if len(b.replicas.dirs) != 1 {
		t.Errorf("claims left: %v", b.replicas.dirs)
	}
}
