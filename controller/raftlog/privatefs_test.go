package raftlog

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestOpenPrivateModes: the raft log Open creates (its directory, with a
// missing parent, and pebble's WAL, MANIFEST, OPTIONS, LOCK and marker
// files) is 0700 and 0600 under the common umask 022, across a reopen
// (which writes a new WAL and MANIFEST).
func TestOpenPrivateModes(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	root := t.TempDir()
	dir := filepath.Join(root, "meta", "raft")
	for range 2 {
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append([]raftpb.Entry{{Index: s.st.lastIndex + 1, Term: 1, Data: []byte("scram keys")}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	files := 0
	err := filepath.WalkDir(filepath.Join(root, "meta"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
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
	if files < 4 {
		t.Fatalf("%d files: not pebble's layout", files)
	}
}
