package replicamgr

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/storage"
)

// TestNewSyncsDataDir: a partition directory an earlier process created,
// its name never synced in the data directory, is durable once New
// returns, before any log opens (storage.SyncAtStart): a power cut after
// the restart keeps it.
func TestNewSyncsDataDir(t *testing.T) {
	mem := storage.NewMemFS()
	if err := storage.MkdirAllDurable(mem, "/data"); err != nil {
		t.Fatal(err)
	}
	if err := storage.WriteFileSyncFS(mem, "/data/meta.properties", []byte("node.id=1\n")); err != nil {
		t.Fatal(err)
	}
	if err := mem.MkdirAll("/data/t-0", storage.DirMode); err != nil { // the name is not synced
		t.Fatal(err)
	}
	if _, err := mem.CrashClone(nil).Stat("/data/t-0"); err == nil {
		t.Fatal("the partition directory is durable before New: the test shows nothing")
	}
	New(context.Background(), Config{NodeID: 1, LogDir: "/data", FS: mem, Logger: zerolog.Nop()})
	if _, err := mem.CrashClone(nil).Stat("/data/t-0"); err != nil {
		t.Fatalf("after New, a power cut loses the partition directory: %v", err)
	}
}
