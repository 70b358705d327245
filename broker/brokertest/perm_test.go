package brokertest

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDataDirModes: everything a node creates under log.dirs (partition
// directories and their segments, indexes and checkpoints, the metadata
// log's pebble files, meta.properties) is private to its user: no group
// or world permission, directories 0700 and files 0600. The umask is set
// to the common 022 for the test, so a mode left to it would show.
func TestDataDirModes(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	c := startCluster(t, 1)
	addr := c.Addr(1)
	if code := createTopic(t, addr, "modes", 2, 1); code != 0 {
		t.Fatalf("create topic: %d", code)
	}
	if err := produceOne(t, addr, "modes"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("modes"), kgo.ConsumerGroup("modes-g"))
	if err != nil {
		t.Fatal(err)
	}
	// A committed offset writes __consumer_offsets' files too.
	eventually(t, 10*time.Second, "a record consumed", func() bool {
		return cl.PollFetches(t.Context()).NumRecords() > 0
	})
	if err := cl.CommitUncommittedOffsets(t.Context()); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	// A clean stop writes the shutdown markers and checkpoints.
	if err := c.Stop(1); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(c.opts.Dir, "node-1")
	var dirs, files int
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want, dirs = 0o700, dirs+1
		} else {
			files++
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %#o, want %#o", path, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk saw the layout: the data dir, the metadata log's, the
	// topic's two partitions and __consumer_offsets'.
	if dirs < 5 || files < 10 {
		t.Fatalf("walked %d directories and %d files under %s: not the node's layout", dirs, files, root)
	}
}
