package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMemFSMatchesOS runs one script of file-system calls on OSFS and on
// MemFS and requires the same outcome from each: what every call returns
// (errors by class), and the tree left behind. MemFS stands in for the disk
// in crash tests only if it behaves like one while nothing crashes.
func TestMemFSMatchesOS(t *testing.T) {
	run := func(fs FS, root string) []string {
		var out []string
		note := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
		p := func(name string) string { return filepath.Join(root, name) }
		errClass := func(err error) string {
			for _, e := range []error{os.ErrNotExist, os.ErrExist, os.ErrClosed, syscall.ENOTEMPTY, syscall.ENOTDIR, syscall.EISDIR, syscall.EBADF, syscall.EINVAL} {
				if errors.Is(err, e) {
					return e.Error()
				}
			}
			if err != nil && strings.Contains(err.Error(), "invalid use of WriteAt on file opened with O_APPEND") {
				return "WriteAt in append mode"
			}
			if err != nil {
				return "other: " + err.Error()
			}
			return "ok"
		}
		open := func(name string, flag int) File {
			f, err := fs.OpenFile(p(name), flag, 0o644)
			note("open %s %#x: %s", name, flag, errClass(err))
			return f
		}
		note("mkdir: %s", errClass(fs.MkdirAll(p("d/e"), 0o755)))
		note("mkdir again: %s", errClass(fs.MkdirAll(p("d/e"), 0o755)))
		open("missing", os.O_RDONLY)
		open("d/missing/x", os.O_RDWR|os.O_CREATE)
		f := open("d/a", os.O_RDWR|os.O_CREATE|os.O_TRUNC)
		_, err := f.WriteAt([]byte("hello world"), 0)
		note("writeat: %s", errClass(err))
		_, err = f.WriteAt([]byte("!"), 20) // leaves a hole of zeros
		note("writeat past end: %s", errClass(err))
		note("truncate: %s", errClass(f.Truncate(15)))
		note("preallocate: %s", errClass(f.Preallocate(15, 5)))
		note("preallocate inside: %s", errClass(f.Preallocate(0, 3)))
		st, err := f.Stat()
		note("stat: %s size %d", errClass(err), st.Size())
		buf := make([]byte, 30)
		n, err := f.ReadAt(buf, 6)
		note("readat: %d %q %s", n, buf[:n], errClass(err))
		n, err = f.ReadAt(buf[:3], 40)
		note("readat past end: %d %s", n, errClass(err))
		note("sync: %s, fdatasync: %s", errClass(f.Sync()), errClass(f.SyncData()))
		note("close: %s", errClass(f.Close()))
		note("close again: %s", errClass(f.Close()))

		ap := open("d/e/ix", os.O_RDWR|os.O_CREATE|os.O_APPEND)
		_, err = ap.Write([]byte("0123456789"))
		note("append: %s", errClass(err))
		note("cut: %s", errClass(ap.Truncate(4)))
		_, err = ap.Write([]byte("ab"))
		note("append after cut: %s", errClass(err))
		_, err = ap.WriteAt([]byte("x"), 0)
		note("writeat on append: %s", errClass(err))
		ap.Close()

		w := open("d/b", os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		w.Write([]byte("one"))
		w.Write([]byte("two"))
		_, err = w.ReadAt(buf, 0)
		note("read write-only: %s", errClass(err))
		w.Close()
		open("d/b", os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		r := open("d/b", os.O_RDONLY)
		_, err = r.WriteAt([]byte("x"), 0)
		note("write read-only: %s", errClass(err))
		note("truncate read-only: %s", errClass(r.Truncate(0)))
		note("rename over: %s", errClass(fs.Rename(p("d/b"), p("d/a"))))
		n, _ = r.ReadAt(buf, 0) // still the renamed file
		note("read renamed: %q", buf[:n])
		note("remove open file: %s", errClass(fs.Remove(p("d/a"))))
		n, _ = r.ReadAt(buf, 0) // removed, still open
		note("read removed: %q", buf[:n])
		r.Close()
		note("remove missing: %s", errClass(fs.Remove(p("d/a"))))
		note("remove non-empty: %s", errClass(fs.Remove(p("d"))))
		note("rename missing: %s", errClass(fs.Rename(p("d/zz"), p("d/yy"))))
		note("rename dir: %s", errClass(fs.Rename(p("d/e"), p("d/f"))))
		note("open dir: %s", errClass(func() error { _, err := fs.OpenFile(p("d/f"), os.O_RDWR, 0); return err }()))
		note("mkdir over file: %s", errClass(fs.MkdirAll(p("d/f/ix/z"), 0o755)))
		note("syncdir: %s", errClass(fs.SyncDir(p("d"))))
		note("syncdir missing: %s", errClass(fs.SyncDir(p("nope"))))
		_, err = fs.Stat(p("d/f/ix"))
		note("stat: %s", errClass(err))
		_, err = fs.ReadDir(p("nope"))
		note("readdir missing: %s", errClass(err))

		// The tree, with contents.
		var walk func(dir string, depth int)
		walk = func(dir string, depth int) {
			ents, err := fs.ReadDir(dir)
			if err != nil {
				note("readdir %s: %v", dir, err)
				return
			}
			for _, e := range ents {
				name := filepath.Join(dir, e.Name())
				if e.IsDir() {
					note("%s%s/", strings.Repeat(" ", depth), e.Name())
					walk(name, depth+1)
					continue
				}
				b, err := readFile(fs, name)
				note("%s%s %q %v", strings.Repeat(" ", depth), e.Name(), b, err)
			}
		}
		walk(root, 0)
		note("removeall: %s", errClass(fs.RemoveAll(p("d"))))
		note("removeall missing: %s", errClass(fs.RemoveAll(p("d"))))
		ents, err := fs.ReadDir(root)
		note("left: %d %s", len(ents), errClass(err))
		return out
	}
	osOut := run(OSFS, t.TempDir())
	memOut := run(NewMemFS(), "/data")
	for i := range max(len(osOut), len(memOut)) {
		var o, m string
		if i < len(osOut) {
			o = osOut[i]
		}
		if i < len(memOut) {
			m = memOut[i]
		}
		if o != m {
			t.Errorf("step %d: OS %q, MemFS %q", i, o, m)
		}
	}
}

// TestMemFSCrashDurable: without rng a crash keeps exactly what was synced:
// file contents as of their last sync, names as of their directory's.
func TestMemFSCrashDurable(t *testing.T) {
	fs := NewMemFS()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fs.MkdirAll("/p", 0o755))
	must(fs.SyncDir("/"))
	f, err := fs.OpenFile("/p/synced", os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	f.Write([]byte("durable"))
	must(f.SyncData())
	f.Write([]byte(" lost"))
	g, err := fs.OpenFile("/p/unnamed", os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	g.Write([]byte("synced data, name never synced"))
	must(g.Sync())

	img := fs.CrashClone(nil)
	if _, err := img.Stat("/p/synced"); !os.IsNotExist(err) {
		t.Fatalf("a file whose directory was never synced survived: %v", err)
	}
	must(fs.SyncDir("/p"))
	img = fs.CrashClone(nil)
	if b, err := readFile(img, "/p/synced"); err != nil || string(b) != "durable" {
		t.Fatalf("after SyncDir: %q, %v; want the synced contents only", b, err)
	}

	// Renames and removals revert until the directory is synced.
	must(fs.Rename("/p/synced", "/p/renamed"))
	must(fs.Remove("/p/unnamed"))
	img = fs.CrashClone(nil)
	if _, err := img.Stat("/p/renamed"); !os.IsNotExist(err) {
		t.Fatal("an unsynced rename survived")
	}
	if _, err := img.Stat("/p/unnamed"); err != nil {
		t.Fatal("an unsynced removal survived")
	}
	// A truncation is a change to the contents like a write.
	must(f.Truncate(2))
	if b, _ := readFile(fs.CrashClone(nil), "/p/synced"); string(b) != "durable" {
		t.Fatalf("unsynced truncation survived: %q", b)
	}
	must(f.SyncData())
	must(fs.SyncDir("/p"))
	img = fs.CrashClone(nil)
	if b, _ := readFile(img, "/p/renamed"); string(b) != "du" {
		t.Fatalf("after syncs: %q", b)
	}
	if _, err := img.Stat("/p/unnamed"); !os.IsNotExist(err) {
		t.Fatal("a synced removal did not survive")
	}

	// The image is independent and wholly durable.
	h, err := img.OpenFile("/p/renamed", os.O_RDWR, 0)
	must(err)
	h.WriteAt([]byte("X"), 0)
	if b, _ := readFile(fs, "/p/renamed"); string(b) != "du" {
		t.Fatalf("writing the image changed the original: %q", b)
	}
	if b, _ := readFile(img.CrashClone(nil), "/p/renamed"); string(b) != "du" {
		t.Fatalf("image of the image: %q", b)
	}
}

// TestMemFSCrashTorn: with rng, a crash keeps the durable state plus a
// prefix of each file's pending changes, the next write maybe torn; never
// anything else.
func TestMemFSCrashTorn(t *testing.T) {
	fs := NewMemFS()
	f, err := fs.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fs.SyncDir("/")
	f.Write([]byte("base"))
	f.SyncData()
	writes := []string{"-aaaa", "-bbbb", "-cccc"}
	for _, w := range writes {
		f.Write([]byte(w))
	}
	// Every prefix of "base-aaaa-bbbb-cccc" at least "base" long is an
	// allowed image (a whole write or a torn one), and nothing else.
	all := "base" + strings.Join(writes, "")
	seen := map[int]bool{}
	for seed := range uint64(400) {
		b, err := readFile(fs.CrashClone(rand.New(rand.NewPCG(seed, 0))), "/f")
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 4 || !strings.HasPrefix(all, string(b)) {
			t.Fatalf("seed %d: image %q is not a prefix of %q at least as long as the synced %q", seed, b, all, "base")
		}
		seen[len(b)] = true
	}
	if !seen[4] || !seen[len(all)] || len(seen) < 8 {
		t.Fatalf("images of %v bytes only; want the synced state, everything, and torn writes between", seen)
	}
}

// TestMemFSConcurrentReads: ReadAt may run alongside writes, as readers of
// a Log run alongside its writer (run with -race).
func TestMemFSConcurrentReads(t *testing.T) {
	fs := NewMemFS()
	f, _ := fs.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 8)
		for range 1000 {
			if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
				t.Error(err)
				return
			}
		}
	}()
	for i := range 1000 {
		f.WriteAt(bytes.Repeat([]byte{byte(i)}, 8), int64(i%4))
	}
	<-done
}
