package replicamgr

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/storage"
)

// TestEpochSaver: logs queued with a new leader's entry pending all get
// it written, by at most epochSaveWorkers goroutines (each log queued
// twice, as two view changes do); once the manager is shutting down (Go
// refuses) nothing stays queued.
func TestEpochSaver(t *testing.T) {
	var running, peak atomic.Int32
	goFn := func(f func()) bool {
		go func() {
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			defer running.Add(-1)
			f()
		}()
		return true
	}
	m := New(context.Background(), Config{NodeID: 1, LogDir: t.TempDir(), Logger: zerolog.Nop(), Go: goFn})
	var logs []*storage.Log
	for i := range 40 {
		l, err := storage.Open(filepath.Join(t.TempDir(), fmt.Sprintf("t-%d", i)), storage.DefaultConfig(), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		if err := l.AssignEpoch(3, 0); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	for _, l := range logs {
		m.epochSaves.add(l)
		m.epochSaves.add(l)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, l := range logs {
		for l.EpochPending() {
			if time.Now().After(deadline) {
				t.Fatal("a queued log's epoch checkpoint was never written")
			}
			time.Sleep(time.Millisecond)
		}
	}
	if p := peak.Load(); p > epochSaveWorkers {
		t.Fatalf("%d savers at once, the bound is %d", p, epochSaveWorkers)
	}

	// Shutting down: Go refuses, and the queue does not keep the log.
	m.cfg.Go = func(func()) bool { return false }
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		m.epochSaves.mu.Lock()
		idle := m.epochSaves.workers == 0
		m.epochSaves.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("savers did not exit with an empty queue")
		}
	}
	if err := logs[0].AssignEpoch(4, 0); err != nil {
		t.Fatal(err)
	}
	m.epochSaves.add(logs[0])
	m.epochSaves.mu.Lock()
	left := len(m.epochSaves.queue) + len(m.epochSaves.queued)
	m.epochSaves.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d entries queued with nobody to drain them", left)
	}
}
