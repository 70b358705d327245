package main

import (
	"context"
	"os"
	"testing"
)

func TestDiskSeqWrite(t *testing.T) {
	dir := t.TempDir()
	r, err := diskSeqWrite(context.Background(), dir, 3<<20+5, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != 3<<20+5 || r.Chunk != 1<<20 || r.Seconds <= 0 || r.MBps <= 0 {
		t.Errorf("result %+v: want 3 MiB + 5 B written in 1 MiB chunks, a positive time and rate", r)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the file was left behind: %v", ents)
	}
	if _, err := diskSeqWrite(context.Background(), dir, 0, 1); err == nil {
		t.Error("a zero total was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := diskSeqWrite(ctx, dir, 1<<20, 1<<20); err == nil {
		t.Error("a cancelled context did not stop it")
	}
}
