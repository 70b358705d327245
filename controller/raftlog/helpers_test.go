package raftlog

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand"
	"os"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

func TestMain(m *testing.M) {
	// MemoryStorage panics through raft's logger in the differential test;
	// keep the output quiet (DefaultLogger.Panicf still panics).
	raft.SetLogger(&raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)})
	os.Exit(m.Run())
}

func openT(t *testing.T, dir string) *Storage {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func closeT(t *testing.T, s *Storage) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func mustMarshal(t *testing.T, m interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

func entriesEqual(a, b []raftpb.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Index != b[i].Index || a[i].Term != b[i].Term || a[i].Type != b[i].Type ||
			!bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

func fmtEntries(es []raftpb.Entry) string {
	var b bytes.Buffer
	for _, e := range es {
		fmt.Fprintf(&b, "{i%d t%d %dB} ", e.Index, e.Term, len(e.Data))
	}
	return b.String()
}

// memEntries calls ms.Entries, converting a panic into panicked=true.
func memEntries(ms *raft.MemoryStorage, lo, hi, max uint64) (ents []raftpb.Entry, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			panicked = true
		}
	}()
	ents, err = ms.Entries(lo, hi, max)
	return ents, err, false
}

// checkEntries compares Entries(lo, hi, max) on both storages.
func checkEntries(t *testing.T, ms *raft.MemoryStorage, s *Storage, lo, hi, max uint64) {
	t.Helper()
	want, wantErr, panicked := memEntries(ms, lo, hi, max)
	got, err := s.Entries(lo, hi, max)
	if panicked {
		if err == nil {
			t.Fatalf("Entries(%d,%d,%d): MemoryStorage panics, raftlog returned nil error", lo, hi, max)
		}
		return
	}
	if err != wantErr {
		t.Fatalf("Entries(%d,%d,%d) error = %v, want %v", lo, hi, max, err, wantErr)
	}
	if !entriesEqual(got, want) {
		t.Fatalf("Entries(%d,%d,%d) = %s, want %s", lo, hi, max, fmtEntries(got), fmtEntries(want))
	}
}

// checkSame compares every read method of s against ms. With exhaustive set,
// Entries is checked for every (lo, hi) in range and several maxSizes;
// otherwise for samples drawn from rng.
func checkSame(t *testing.T, ms *raft.MemoryStorage, s *Storage, exhaustive bool, rng *rand.Rand) {
	t.Helper()
	hs, cs, err := s.InitialState()
	whs, wcs, werr := ms.InitialState()
	if err != werr {
		t.Fatalf("InitialState error = %v, want %v", err, werr)
	}
	if !bytes.Equal(mustMarshal(t, &hs), mustMarshal(t, &whs)) {
		t.Fatalf("HardState = %+v, want %+v", hs, whs)
	}
	if !bytes.Equal(mustMarshal(t, &cs), mustMarshal(t, &wcs)) {
		t.Fatalf("ConfState = %+v, want %+v", cs, wcs)
	}
	first, err := s.FirstIndex()
	wfirst, werr := ms.FirstIndex()
	if first != wfirst || err != werr {
		t.Fatalf("FirstIndex = %d, %v, want %d, %v", first, err, wfirst, werr)
	}
	last, err := s.LastIndex()
	wlast, werr := ms.LastIndex()
	if last != wlast || err != werr {
		t.Fatalf("LastIndex = %d, %v, want %d, %v", last, err, wlast, werr)
	}
	snap, err := s.Snapshot()
	wsnap, werr := ms.Snapshot()
	if err != werr {
		t.Fatalf("Snapshot error = %v, want %v", err, werr)
	}
	if !bytes.Equal(mustMarshal(t, &snap.Metadata), mustMarshal(t, &wsnap.Metadata)) ||
		!bytes.Equal(snap.Data, wsnap.Data) {
		t.Fatalf("Snapshot = %+v, want %+v", snap, wsnap)
	}
	lowest := uint64(0)
	if wfirst > 3 {
		lowest = wfirst - 3
	}
	for i := lowest; i <= wlast+2; i++ {
		term, err := s.Term(i)
		wterm, werr := ms.Term(i)
		if term != wterm || err != werr {
			t.Fatalf("Term(%d) = %d, %v, want %d, %v", i, term, err, wterm, werr)
		}
	}
	maxes := []uint64{0, 1, 40, 100, 300, math.MaxUint64}
	if exhaustive {
		for lo := lowest; lo <= wlast+1; lo++ {
			for hi := lo; hi <= wlast+1; hi++ {
				for _, m := range maxes {
					checkEntries(t, ms, s, lo, hi, m)
				}
			}
		}
		return
	}
	checkEntries(t, ms, s, wfirst, wlast+1, math.MaxUint64)
	span := wlast + 2 - lowest
	for range 20 {
		lo := lowest + uint64(rng.Int63n(int64(span)))
		hi := lo + uint64(rng.Int63n(int64(wlast+2-lo)))
		if rng.Intn(10) == 0 {
			hi = wlast + 2 // out of bound: MemoryStorage panics
		}
		checkEntries(t, ms, s, lo, hi, maxes[rng.Intn(len(maxes))])
	}
}
