package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Partition directories: the broker's part of a partition directory's
// life, beside the log in it, on the same FS, so that MemFS's crash tests
// see it too. The broker names the topic that owns the directory
// (WritePartitionMetadata) before it opens the log there, reads it back
// (ReadPartitionMetadata) to tell a directory of an earlier topic of the
// same name, and deletes the directory (DeletePartitionDir, which
// Log.Delete uses too) when the replica or a stray copy of it goes.
//
// partition.metadata is Kafka's text file, so Kafka's tools read it:
//
//	version: 0
//	topic_id: <the topic's UUID, URL-safe base64 without padding: 22 characters>
//
// It is replaced whole (WriteFileSyncFS): a crash leaves the old file or
// the new one, never a torn or missing one once the first was durable.

// PartitionMetadataFile is the name of the file in a partition directory
// that names the topic owning it.
const PartitionMetadataFile = "partition.metadata"

// ErrBadPartitionMetadata: a partition.metadata that names no topic id.
var ErrBadPartitionMetadata = errors.New("storage: partition.metadata names no topic id")

// WritePartitionMetadata makes dir a partition directory of the topic
// whose id is topicID: it creates dir if it is missing, durably in its
// parent, and replaces its partition.metadata durably and atomically (a
// temporary file written and fsynced, renamed over the old one, the
// directory fsynced). fs nil is OSFS.
//
// A directory it creates also gets the log's first segment, empty, so
// that one sync of the directory makes both names durable and Open finds
// the log begun: a new partition costs three fsyncs (the parent, the
// file, the directory) instead of five, which a CreateTopics of a
// thousand partitions pays a thousand times. A crash part way leaves a
// directory without partition.metadata (the broker writes it again, and
// Open creates and syncs what is missing) or one whose names may not be
// durable yet, which holds nothing acknowledged.
func WritePartitionMetadata(fs FS, dir, topicID string) error {
	fs = fsOrOS(fs)
	_, statErr := fs.Stat(dir)
	fresh := errors.Is(statErr, os.ErrNotExist)
	if err := mkdirAllDurable(fs, dir); err != nil {
		return fmt.Errorf("partition directory %s: %w", dir, err)
	}
	data := fmt.Appendf(nil, "version: 0\ntopic_id: %s\n", topicID)
	path := filepath.Join(dir, PartitionMetadataFile)
	if !fresh {
		if err := WriteFileSyncFS(fs, path, data); err != nil {
			return fmt.Errorf("partition directory %s: %w", dir, err)
		}
		return nil
	}
	if err := renameSynced(fs, path, data); err != nil {
		return fmt.Errorf("partition directory %s: %w", dir, err)
	}
	f, err := fs.OpenFile(segmentPath(dir, 0, ".log"), os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
	if err != nil {
		return fmt.Errorf("partition directory %s: first segment: %w", dir, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("partition directory %s: first segment: %w", dir, err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return fmt.Errorf("partition directory %s: sync: %w", dir, err)
	}
	return nil
}

// ReadPartitionMetadata returns the topic id that dir's partition.metadata
// names. The error is the file system's if the file cannot be read
// (errors.Is(err, os.ErrNotExist) when there is none), or
// ErrBadPartitionMetadata if it names no topic id; a version line is not
// required, and versions other than 0 are read as 0. fs nil is OSFS.
func ReadPartitionMetadata(fs FS, dir string) (string, error) {
	data, err := readFile(fsOrOS(fs), filepath.Join(dir, PartitionMetadataFile))
	if err != nil {
		return "", fmt.Errorf("partition directory %s: %w", dir, err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "topic_id: "); ok && len(v) == 22 {
			return v, nil
		}
	}
	return "", fmt.Errorf("partition directory %s: %w", dir, ErrBadPartitionMetadata)
}

// DeletedSuffix marks a partition directory being deleted.
const DeletedSuffix = ".fjord-delete"

// DeletePartitionDir removes the partition directory dir and everything
// in it, crash-safely: dir is renamed to dir+DeletedSuffix, the rename
// made durable, then the renamed directory removed. A crash mid-removal so
// leaves a directory start-up recognises as garbage (RemoveDeletedDirs),
// never a partition directory missing some of its files that would pass
// for a whole one; the rename must be durable before the first removal
// is, which the parent's sync makes sure of (the removals are changes to
// another directory, which a crash may keep without the rename). A
// leftover of an earlier deletion under the same name, which would make
// the rename fail, goes first. fs nil is OSFS.
func DeletePartitionDir(fs FS, dir string) error {
	fs = fsOrOS(fs)
	gone := dir + DeletedSuffix
	if err := fs.RemoveAll(gone); err != nil {
		return fmt.Errorf("delete %s: %w", dir, err)
	}
	if err := fs.Rename(dir, gone); err != nil {
		return fmt.Errorf("delete %s: %w", dir, err)
	}
	if err := fs.SyncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("delete %s: sync parent directory: %w", dir, err)
	}
	if err := fs.RemoveAll(gone); err != nil {
		return fmt.Errorf("delete %s: %w", dir, err)
	}
	return nil
}

// SetAsideDir renames a partition directory whose disk failed to aside,
// durably, and keeps it: unlike a deletion it is the operator's to
// inspect (which blocks went bad) and to remove. aside must not end in
// DeletedSuffix, nor look like a partition directory ("name-<n>"), or a
// restart would remove it.
func SetAsideDir(fs FS, dir, aside string) error {
	fs = fsOrOS(fs)
	if err := fs.Rename(dir, aside); err != nil {
		return fmt.Errorf("set %s aside: %w", dir, err)
	}
	if err := fs.SyncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("set %s aside: sync parent directory: %w", dir, err)
	}
	return nil
}

// RemoveDeletedDirs finishes deletions interrupted by a crash, in logDir
// on the operating system's file system; RemoveDeletedDirsFS takes another.
func RemoveDeletedDirs(logDir string) {
	RemoveDeletedDirsFS(OSFS, logDir)
}

// RemoveDeletedDirsFS is RemoveDeletedDirs on fs.
func RemoveDeletedDirsFS(fs FS, logDir string) {
	ents, _ := fs.ReadDir(logDir)
	for _, e := range ents {
		if e.IsDir() && strings.HasSuffix(e.Name(), DeletedSuffix) {
			fs.RemoveAll(logDir + "/" + e.Name())
		}
	}
}
