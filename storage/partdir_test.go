package storage

import (
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/rs/zerolog"
)

// TestPartitionMetadataCrash: WritePartitionMetadata crashed before any
// of its changes (each write, sync, creation and rename), with each image
// keeping a random part of what was not yet durable, leaves
// partition.metadata naming the old topic id or the new one: never a torn
// file, one naming no id, or none at all where one was. Once it has
// returned, a crash keeps the new one. Into a new directory, a crash
// before it returned may leave no file (nothing was promised yet), but
// never a file without the id.
func TestPartitionMetadataCrash(t *testing.T) {
	const dir = "/logs/topic-0"
	const oldID, newID = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"
	for _, replace := range []bool{false, true} {
		crashes := 0
		for change := 0; ; change++ {
			last := false // the crash comes after WritePartitionMetadata returned
			for seed := range uint64(8) {
				fs := newCrashFS(NewMemFS(), rand.New(rand.NewPCG(seed, uint64(change))))
				if replace {
					if err := WritePartitionMetadata(fs, dir, oldID); err != nil {
						t.Fatal(err)
					}
				}
				fs.arm(change)
				if err := WritePartitionMetadata(fs, dir, newID); err != nil {
					t.Fatal(err)
				}
				img := fs.collect()
				if img == nil {
					img, last = fs.MemFS.CrashClone(fs.rng), true
				}
				crashes++
				id, err := ReadPartitionMetadata(img, dir)
				switch {
				case last:
					if err != nil || id != newID {
						t.Fatalf("replace=%v: a crash after WritePartitionMetadata returned (image %d) left %q, %v; want %q", replace, seed, id, err, newID)
					}
				case err == nil && (id == newID || replace && id == oldID):
				case !replace && errors.Is(err, os.ErrNotExist):
				default:
					t.Fatalf("regression: replace=%v: a crash at change %d of WritePartitionMetadata (image %d) left partition.metadata reading %q, %v", replace, change, seed, id, err)
				}
			}
			if last {
				break
			}
		}
		t.Logf("replace=%v: %d crash images checked", replace, crashes)
	}
}

// TestDeletePartitionDirLeftover: a directory of an earlier deletion under
// the same name, whose removal failed after its rename, does not stop the
// next one (the rename over it would fail).
func TestDeletePartitionDirLeftover(t *testing.T) {
	fs := NewMemFS()
	const dir = "/logs/topic-0"
	for _, d := range []string{dir, dir + DeletedSuffix} {
		if err := WritePartitionMetadata(fs, d, "AAAAAAAAAAAAAAAAAAAAAA"); err != nil {
			t.Fatal(err)
		}
	}
	if err := DeletePartitionDir(fs, dir); err != nil {
		t.Fatal(err)
	}
	ents, err := fs.ReadDir("/logs")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Fatalf("after DeletePartitionDir, /logs holds %d entries, the first %s", len(ents), ents[0].Name())
	}
}

// TestReadPartitionMetadata: Kafka's file reads back; a missing one is
// os.ErrNotExist, one without a topic id ErrBadPartitionMetadata.
func TestReadPartitionMetadata(t *testing.T) {
	fs := NewMemFS()
	const dir = "/logs/topic-0"
	if _, err := ReadPartitionMetadata(fs, dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no directory: %v", err)
	}
	if err := WritePartitionMetadata(fs, dir, "q-5rIvrPRhmO4BQoLnQ6jQ"); err != nil {
		t.Fatal(err)
	}
	if id, err := ReadPartitionMetadata(fs, dir); err != nil || id != "q-5rIvrPRhmO4BQoLnQ6jQ" {
		t.Fatalf("read back %q, %v", id, err)
	}
	for _, bad := range []string{"", "version: 0\n", "version: 0\ntopic_id: short\n", "topic_id:q-5rIvrPRhmO4BQoLnQ6jQ\n"} {
		if err := WriteFileSyncFS(fs, dir+"/"+PartitionMetadataFile, []byte(bad)); err != nil {
			t.Fatal(err)
		}
		if id, err := ReadPartitionMetadata(fs, dir); !errors.Is(err, ErrBadPartitionMetadata) {
			t.Fatalf("%q read as %q, %v", bad, id, err)
		}
	}
}

// TestNewPartitionCrash: a partition's whole start as the broker makes it
// (WritePartitionMetadata into a new directory, Open, the leader's
// AssignEpoch, an append and its Flush), crashed before each of its
// changes with each image keeping a random part of what was not durable,
// then restarted as the broker restarts (partition.metadata written again
// if missing, Open): every image opens, and once Flush has returned the
// batch, the directory's names and the epoch survive. The new directory's
// and the assigned epoch's fsyncs are shared or deferred, so this is what
// checks that each name is still durable before anything needs it.
func TestNewPartitionCrash(t *testing.T) {
	const dir = "/logs/topic-0"
	const id = "BBBBBBBBBBBBBBBBBBBBBB"
	// Epoch -1: a batch nobody stamped saves no epoch, and with it no sync
	// of the directory, so only WritePartitionMetadata's makes the names
	// durable.
	for _, epoch := range []int32{3, -1} {
		crashes := 0
		for change := 0; ; change++ {
			last := false
			for seed := range uint64(5) {
				rng := rand.New(rand.NewPCG(seed, uint64(change)))
				fs := newCrashFS(NewMemFS(), rng)
				fs.arm(change)
				if err := WritePartitionMetadata(fs, dir, id); err != nil {
					t.Fatal(err)
				}
				cfg := testConfig()
				cfg.FS = fs
				l := openLog(t, dir, cfg)
				if epoch >= 0 {
					if err := l.AssignEpoch(epoch, 0); err != nil {
						t.Fatal(err)
					}
				}
				appendAt(t, l, batchOpts{N: 4}, epoch)
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				img := fs.collect()
				if img == nil {
					img, last = fs.MemFS.CrashClone(rng), true
				}
				crashes++
				if got, err := ReadPartitionMetadata(img, dir); err != nil || got != id {
					if last {
						t.Fatalf("image %d after the flush: partition.metadata %q, %v", seed, got, err)
					}
					if err := WritePartitionMetadata(img, dir, id); err != nil {
						t.Fatalf("change %d image %d: rewriting partition.metadata: %v", change, seed, err)
					}
				}
				c := testConfig()
				c.FS = img
				r, err := Open(dir, c, zerolog.Nop())
				if err != nil {
					t.Fatalf("change %d image %d: %v", change, seed, err)
				}
				end, latest := r.EndOffset(), r.LatestEpoch()
				r.Close()
				if last && (end != 4 || latest != epoch) {
					t.Fatalf("epoch %d: image %d after the flush: end %d epoch %d, want 4 and %d", epoch, seed, end, latest, epoch)
				}
			}
			if last {
				break
			}
		}
		t.Logf("epoch %d: %d crash images checked", epoch, crashes)
	}
}

// TestNewPartitionDirSyncFails: the directory sync that makes a new
// partition's names durable fails (EIO) and the broker opens the
// partition again, which now finds partition.metadata and the empty
// segment in place. The log syncs its directory before its first change
// anyway (an empty log's names are not trusted to be durable), so a
// batch flushed, unstamped (no epoch checkpoint syncs the directory for
// it), survives a power loss.
func TestNewPartitionDirSyncFails(t *testing.T) {
	const dir = "/logs/topic-0"
	const id = "BBBBBBBBBBBBBBBBBBBBBB"
	mem := NewMemFS()
	efs := NewErrorFS(mem, Fault{Op: OpSyncDir, Path: dir, Times: 1})
	if err := WritePartitionMetadata(efs, dir, id); err == nil {
		t.Fatal("WritePartitionMetadata succeeded through a failing directory sync")
	}
	if got, err := ReadPartitionMetadata(efs, dir); err != nil || got != id {
		t.Fatalf("setup: after the failed sync partition.metadata reads %q, %v", got, err)
	}
	cfg := testConfig()
	cfg.FS = efs
	l := openLog(t, dir, cfg)
	appendAt(t, l, batchOpts{N: 4}, -1)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	c := testConfig()
	c.FS = mem.CrashClone(nil) // only what was made durable
	r := openLog(t, dir, c)
	if end := r.EndOffset(); end != 4 {
		t.Fatalf("after a power loss the flushed batch is gone: end %d, want 4", end)
	}
}
