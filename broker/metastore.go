package broker

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/fjordlog/fjord/storage"
	"os"
	"path/filepath"
	"sync"
)

// metaFile is the single-node metadata file in the log directory. It is
// rewritten whole (temp file, fsync, rename, fsync dir) on every change;
// changes are rare (topic create/delete, producer-id blocks).
const metaFile = "fjord-metadata.json"

// metaState is everything a single node must remember about the cluster
// besides the logs themselves. Version 1.
type metaState struct {
	Version   int                   `json:"version"`
	ClusterID string                `json:"cluster_id"`
	NodeID    int32                 `json:"node_id"`
	Topics    map[string]*topicMeta `json:"topics"`
	// NextProducerID is the first id of the next unallocated block: ids below
	// it may have been handed out before a crash and are never reused.
	NextProducerID int64 `json:"next_producer_id"`
}

type topicMeta struct {
	ID         [16]byte          `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	Internal   bool              `json:"internal,omitempty"`
}

// metastore persists metaState.
//
// Invariant: the file on disk always equals the last state passed to save
// that returned nil.
type metastore struct {
	path string
	mu   sync.Mutex // serialises saves
}

func loadMeta(dir string, nodeID int32, clusterID string) (*metastore, *metaState, error) {
	ms := &metastore{path: filepath.Join(dir, metaFile)}
	b, err := os.ReadFile(ms.path)
	if errors.Is(err, os.ErrNotExist) {
		st := &metaState{Version: 1, ClusterID: clusterID, NodeID: nodeID, Topics: map[string]*topicMeta{}, NextProducerID: 1000}
		if st.ClusterID == "" {
			st.ClusterID = newClusterID()
		}
		return ms, st, ms.save(st)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("metadata %s: %w", ms.path, err)
	}
	var st metaState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, nil, fmt.Errorf("metadata %s: %w", ms.path, err)
	}
	if st.Version != 1 {
		return nil, nil, fmt.Errorf("metadata %s: unknown version %d", ms.path, st.Version)
	}
	if st.NodeID != nodeID {
		return nil, nil, fmt.Errorf("metadata %s: data belongs to node.id %d, configured %d", ms.path, st.NodeID, nodeID)
	}
	if clusterID != "" && st.ClusterID != clusterID {
		return nil, nil, fmt.Errorf("metadata %s: data belongs to cluster %q, configured %q", ms.path, st.ClusterID, clusterID)
	}
	if st.Topics == nil {
		st.Topics = map[string]*topicMeta{}
	}
	return ms, &st, nil
}

func (ms *metastore) save(st *metaState) error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := storage.WriteFileSync(ms.path, b); err != nil {
		return fmt.Errorf("metadata %s: %w", ms.path, err)
	}
	return nil
}

// newClusterID makes a Kafka-style cluster id: 16 random bytes, base64url.
func newClusterID() string {
	var b [16]byte
	rand.Read(b[:])
	return encodeUUID(b)
}

func newTopicID() [16]byte {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80
	return b
}
