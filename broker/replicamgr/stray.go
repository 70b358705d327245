package replicamgr

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
)

// Stray replicas: partition directories on disk that the metadata no
// longer places on this broker. A replica moved away (a reassignment) or
// deleted with its topic while this broker was down never gets its
// Unassign, so its files would stay forever. Once the applied image is at
// least this broker's registration (its broker epoch is the registration's
// log index), it holds every change made before this process started, and
// a partition directory that no replica claims and the image does not
// place here is removed, as Kafka removes stray logs.
//
// Why only then: an older image may not yet show a partition placed here
// (moved here, or created, while this broker was down) — but removing its
// directory then would at worst cost a re-fetch; what must never happen is
// removing the copy of a partition this broker is in the ISR of, and an
// image at or past the registration shows every placement that could have
// put it there. A directory the image places here is never touched, even
// for another topic id (openLog deals with that).

// removeStrays removes the partition directories img does not place on
// this broker and no local replica claims. Each removal claims its
// directory until done, so a replica placed there by a later image opens
// only after it (dirClaim). REQUIRES: called from PublishLoop after
// Apply(img).
func (m *Manager) removeStrays(img *controller.Image) {
	fs := storage.OrOS(m.cfg.FS)
	ents, err := fs.ReadDir(m.cfg.LogDir)
	if err != nil {
		m.log.Warn().Err(err).Msg("listing the log directory for stray replicas")
		return
	}
	me := m.cfg.NodeID
	for _, e := range ents {
		name := e.Name()
		i := strings.LastIndexByte(name, '-')
		if !e.IsDir() || i <= 0 || name == m.cfg.MetadataDir {
			continue
		}
		part, err := strconv.ParseInt(name[i+1:], 10, 32)
		if err != nil || part < 0 || strconv.Itoa(int(part)) != name[i+1:] {
			continue
		}
		dir := filepath.Join(m.cfg.LogDir, name)
		if _, err := fs.Stat(filepath.Join(dir, storage.PartitionMetadataFile)); err != nil {
			continue // not a partition directory (or not one Fjord wrote)
		}
		if t := img.Topic(name[:i]); t != nil && int(part) < len(t.Partitions) && slices.Contains(t.Partitions[part].Replicas, me) {
			continue
		}
		r := &m.replicas
		r.mu.Lock()
		if r.dirs[dir] != nil {
			r.mu.Unlock()
			continue // a replica (or its deletion) owns it
		}
		c := &dirClaim{dir: dir, released: make(chan struct{})}
		r.dirs[dir] = c
		r.mu.Unlock()
		m.log.Info().Str("dir", dir).Msg("removing a stray replica: the metadata no longer places this partition here (moved away or deleted while this broker was down)")
		started := m.cfg.Go(func() {
			defer func() {
				r.mu.Lock()
				if r.dirs[dir] == c {
					delete(r.dirs, dir)
				}
				r.mu.Unlock()
				close(c.released)
			}()
			// As storage.Log.Delete: a crash leaves garbage start-up
			// recognises, never a partition directory missing some files.
			if err := storage.DeletePartitionDir(fs, dir); err != nil {
				m.log.Warn().Err(err).Str("dir", dir).Msg("removing a stray replica")
			}
		})
		if !started {
			r.mu.Lock()
			if r.dirs[dir] == c {
				delete(r.dirs, dir)
			}
			r.mu.Unlock()
			close(c.released)
		}
	}
}
