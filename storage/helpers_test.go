package storage

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/recordbatch/batchtest"
	"github.com/rs/zerolog"
)

// The batch builder is batchtest's, which recordbatch's tests share; these
// are the names this package's tests use for it.
type (
	batchOpts  = batchtest.Opts
	testRecord = batchtest.Record
	codecCase  = batchtest.Codec
)

var (
	buildBatch   = batchtest.Build
	fixCRC       = batchtest.FixCRC
	markerRecord = batchtest.MarkerRecord
	i32          = batchtest.I32
	allCodecs    = batchtest.Codecs
)

const (
	attrTransactional = batchtest.AttrTransactional
	attrControl       = batchtest.AttrControl
)

// splitBatches cuts a concatenation of stored batches into batches.
func splitBatches(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("splitBatches: %d trailing bytes", len(b))
		}
		n := int(int32(binary.BigEndian.Uint32(b[8:]))) + 12
		if n < recordbatch.HeaderLen || n > len(b) {
			t.Fatalf("splitBatches: batch length %d with %d bytes left", n, len(b))
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// testConfig is Kafka's defaults with retention off, so nothing a test does
// not ask for is deleted.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.RetentionMs = -1
	cfg.RetentionBytes = -1
	cfg.FileDeleteDelay = 10 * time.Millisecond
	return cfg
}

func openLog(t testing.TB, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	openLogs.Store(filepath.Clean(dir), l)
	t.Cleanup(func() { openLogs.CompareAndDelete(filepath.Clean(dir), l); l.Close() })
	return l
}

// openLogs maps the directory of each log openLog opened to it, for
// activeIndexToDisk.
var openLogs sync.Map

// activeIndexToDisk writes the active segment's in-memory indexes to its
// files, as a clean Close would, when dir is the directory of a log still
// open: checks of the index files then check the indexes the log serves
// lookups from. A closed log's files are left as they are.
func activeIndexToDisk(t testing.TB, dir string) {
	t.Helper()
	v, ok := openLogs.Load(filepath.Clean(dir))
	if !ok {
		return
	}
	l := v.(*Log)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return
	}
	if err := l.active().writeIndexFiles(false); err != nil {
		t.Fatal(err)
	}
}

// appendOpts builds, validates and appends one batch.
func appendOpts(t testing.TB, l *Log, o batchOpts, now int64) AppendResult {
	t.Helper()
	b := buildBatch(t, o)
	res, err := appendRaw(l, b, now)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return res
}

func appendRaw(l *Log, b []byte, now int64) (AppendResult, error) {
	info, err := recordbatch.Validate(b, 0)
	if err != nil {
		return AppendResult{}, err
	}
	return l.Append(b, info, 7, now)
}

// readAll reads every batch from offset to the end, in whatever steps Read
// takes, and returns them one by one.
func readAll(t testing.TB, l *Log, from int64) [][]byte {
	t.Helper()
	var out [][]byte
	off := from
	for off < l.EndOffset() {
		data, err := l.Read(off, 1<<20, l.EndOffset(), nil)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(data) == 0 {
			t.Fatalf("Read(%d) returned nothing before end %d", off, l.EndOffset())
		}
		for _, b := range splitBatches(t, data) {
			out = append(out, b)
			off = recordbatch.LastOffset(b) + 1
		}
	}
	return out
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// filesWithExt lists dir's file names ending in ext, sorted.
func filesWithExt(t testing.TB, dir, ext string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ext {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func wantErrIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want errors.Is %v", err, target)
	}
}

func removeFile(t testing.TB, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// segmentBytes reads a .log file's batches. The active segment of an open
// log may run on into a preallocated zero tail, which is checked and left
// out.
func segmentBytes(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for pos+12 <= len(data) {
		n := int(int32(binary.BigEndian.Uint32(data[pos+8:]))) + 12
		if n == 12 && binary.BigEndian.Uint64(data[pos:]) == 0 {
			break // zero header: preallocated space
		}
		if n < recordbatch.HeaderLen || pos+n > len(data) {
			t.Fatalf("%s: bad batch at %d (length %d, file %d bytes)", path, pos, n, len(data))
		}
		pos += n
	}
	for i, c := range data[pos:] {
		if c != 0 {
			t.Fatalf("%s: non-zero byte at %d after the last batch (ends at %d)", path, pos+i, pos)
		}
	}
	return data[:pos]
}

func segmentSize(t testing.TB, path string) int64 {
	t.Helper()
	return int64(len(segmentBytes(t, path)))
}
