package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/rs/zerolog"
)

// Config is one partition log's policy; Kafka topic config names beside.
type Config struct {
	SegmentBytes       int64 // segment.bytes
	SegmentMs          int64 // segment.ms
	IndexIntervalBytes int32 // index.interval.bytes
	RetentionMs        int64 // retention.ms; -1 = forever
	RetentionBytes     int64 // retention.bytes; -1 = unlimited
	LogAppendTime      bool  // message.timestamp.type=LogAppendTime
	FileDeleteDelay    time.Duration
	// Compacted: cleanup.policy includes compact, so offsets may have gaps
	// (compaction here, or on the leader a follower copies). Otherwise
	// recovery demands that the active segment's batches be contiguous:
	// the base offset is outside the CRC, and a gap there is damage. A
	// topic that stops being compacted may be cut back at an old gap by
	// its next recovery; a follower then fetches the rest again.
	Compacted bool
	// ProducerExpirationMs drops idempotent-producer state idle this long
	// (producer.id.expiration.ms); 0 means DefaultProducerExpirationMs.
	ProducerExpirationMs int64
	// FS holds the log's files; nil means the operating system's (OSFS).
	// Fixed at Open: SetConfig ignores it.
	FS FS
	// Files is the node's cache of open segment files, shared by all its
	// logs; nil means one without a bound. Fixed at Open like FS.
	Files *FileCache
	// Indexes is the node's cache of sealed segments' indexes, shared by
	// all its logs; nil means the process's default one
	// (DefaultIndexCacheBytes). Fixed at Open like FS.
	Indexes *IndexCache
	// Tier makes the log's retention a tiered log's (KIP-405,
	// remote.storage.enable); the zero value: retention as it always was.
	Tier TierRetention
}

// TierRetention is the local retention of a tiered log (broker/tier
// copies its sealed segments to a remote store). A local segment is
// deleted only once the store holds it (its last offset is at most what
// the function given to Log.SetRemoteCopiedEnd returns), and then by
// LocalRetentionMs / LocalRetentionBytes instead of retention.ms /
// retention.bytes, which bound the remote copy (the tier's business, not
// the log's).
//
// It is a hook rather than tiering inside storage: the log never learns
// what a store or a metadata record is, and a log without it behaves
// exactly as before. A plain value, so Configs stay comparable.
type TierRetention struct {
	Enabled bool
	// LocalRetentionMs and LocalRetentionBytes are local.retention.ms and
	// local.retention.bytes: -2 follows retention.ms / retention.bytes,
	// -1 is unbounded.
	LocalRetentionMs    int64
	LocalRetentionBytes int64
}

// local is the local bound of a retention setting: v, or total for -2.
func (t TierRetention) local(v, total int64) int64 {
	if v == -2 {
		return total
	}
	return v
}

// DefaultConfig matches Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 3600 * 1000,
		IndexIntervalBytes: 4096,
		RetentionMs:        7 * 24 * 3600 * 1000,
		RetentionBytes:     -1,
		FileDeleteDelay:    time.Minute,
	}
}

const cleanShutdownFile = "clean-shutdown"

// Log is one partition's log: an ordered list of segments, the last of
// which takes appends.
//
// Concurrency: appends, rolls, retention, truncation, producer state and the
// leader-epoch cache are serialised by mu (one writer at a time). Readers
// never take mu: the writer publishes what they may see (segment list, each
// segment's size and index slices, the end offset, the epoch cache) under
// view or in atomics, held only to copy or swap those few fields. Flush
// serialises fsyncs on flushMu and holds neither mu nor view while syncing.
//
// I/O under mu is the write syscall of an append, plus a few rare fsyncs
// that must happen before the writer goes on: the old segment's at a roll,
// the epoch checkpoint's when a new leader epoch first appears (epochs.go),
// and everything Truncate does, which also holds flushMu (flushMu -> mu) so
// that no Flush can publish a durable offset from before the cut.
//
// Transactions (txn.go) are state under mu like the producer table, which
// they extend; readers see the first unstable offset through txnPub and
// each segment's aborted transactions through segment.aborted, published
// by the writer, and the broker hands in the high watermark through an
// atomic (UpdateHighWatermark).
//
// Invariants: segs is non-empty and sorted by base; segs[i].next <=
// segs[i+1].base (below it when compaction, here or on the leader a
// follower copied, removed the segment's last offsets);
// segs[0].base <= startOffset <= end, and startOffset <= segs[1].base
// when there is a segs[1] (a start inside the first segment is recorded
// in log-start-offset: logstart.go); durable <= end; every entry of the
// epoch cache starts below end, except the latest, which may start at end (an
// epoch recorded before its first batch is written, or whose write failed).
type Log struct {
	dir   string
	cfg   Config
	fs    FS         // never nil
	files *FileCache // never nil
	// indexes holds sealed segments' indexes (never nil); the active
	// segment's stay in its ix.
	indexes *IndexCache
	log     zerolog.Logger

	mu struct {
		sync.Mutex
		producers producers
		txns      txnState              // the open transactions in order (txn.go)
		dirty     map[*segment]struct{} // segments with writes not yet synced
		failed    error                 // sticky: after a failed write or sync the log takes no appends
		// copiedEnd is a tiered log's remote copied end (SetRemoteCopiedEnd).
		copiedEnd func() int64
		closed    bool
		// epochsUnsaved: the cache differs from the checkpoint file, which
		// only retention causes (entries below the new start; Open drops
		// those anyway). Close writes it.
		epochsUnsaved bool
		// savedStart is the offset log-start-offset holds, -1 without the
		// file (logstart.go).
		savedStart int64
		// dirUnsynced: the directory's entries may not be durable, and
		// are made so before the first change (dirDurableLocked): Open
		// removed the clean-shutdown marker, or found a new log (one empty
		// segment), whose names a crash in WritePartitionMetadata, or a
		// failed sync there, may have left undurable. Any sync of the
		// directory clears it.
		dirUnsynced bool
		// hadTxnIndex: this log has had a .txnindex file, so a roll
		// removes any at the new segment's base (one a failed removal left
		// there must not become the new segment's). Logs without aborted
		// transactions skip that.
		hadTxnIndex bool
	}

	// view is the segment list readers see. The slice is replaced, never
	// modified in place, so a reader may keep using the one it loaded; each
	// segment's own readable state is in segment.pub.
	view struct {
		sync.RWMutex
		segs []*segment
	}

	end         atomic.Int64 // log end offset; written under mu
	startOffset atomic.Int64 // log start offset; written under mu
	durable     atomic.Int64 // offsets below this are fsynced
	flushMu     sync.Mutex
	// syncSince is when the oldest fsync of this log still running began
	// (unix ms), 0 when none runs: a sync that never returns (a gray disk)
	// shows as a growing SyncStalledFor, which the broker's stall check
	// reads (the sync itself cannot time out). Written by whoever syncs.
	syncSince atomic.Int64

	// epochs is the leader-epoch cache (epochs.go); never nil after Open.
	// Replaced, never modified, under mu; readers load it without locks.
	epochs atomic.Pointer[epochCache]
	// txnPub is what readers see of mu.txns (FirstUnstableOffset); nil
	// until the log's first transaction. Replaced, never modified, under mu.
	txnPub atomic.Pointer[txnView]
	// hwMark is the highest high watermark UpdateHighWatermark was given;
	// written by the broker without mu, lowered under mu by truncation.
	hwMark atomic.Int64
	// truncations goes up by one when a truncation (Truncate,
	// TruncateFullyAndStartAt) starts and by one when it ends, so it is odd
	// while one runs. Compact, which works mostly without mu, compares it
	// before installing a cleaned segment: a truncation meanwhile may have
	// removed the newer records that made it drop older ones (Kafka pauses
	// its cleaner for the same reason). Read compares it around a read that
	// found bad bytes: a cut and the batches appended after it, read
	// through the index of before, are not damage. Written under mu.
	truncations atomic.Uint64
	// dev is the device of the log's file system with devKnown set, 0
	// until FlushGroup has looked it up (Log.device).
	dev atomic.Uint64
	// epochPending: the cache's latest entry was recorded by AssignEpoch at
	// the log end and is not in the checkpoint file. The next batch written
	// (either append path) saves the cache first; so do SaveEpochs and
	// Close. Written under mu; read anywhere (EpochPending).
	epochPending atomic.Bool
}

// Open opens or creates the log in dir, recovering after an unclean
// shutdown: the active segment is read batch by batch, a torn or corrupt
// tail is truncated, and indexes and producer state are rebuilt.
func Open(dir string, cfg Config, log zerolog.Logger) (*Log, error) {
	return open(dir, cfg, log, false)
}

func open(dir string, cfg Config, log zerolog.Logger, retried bool) (*Log, error) {
	if cfg.FileDeleteDelay == 0 {
		cfg.FileDeleteDelay = time.Minute
	}
	fs := fsOrOS(cfg.FS)
	if err := mkdirAllDurable(fs, dir); err != nil {
		return nil, fmt.Errorf("log %s: %w", dir, err)
	}
	files := cfg.Files
	if files == nil {
		files = unboundedFiles
	}
	indexes := cfg.Indexes
	if indexes == nil {
		indexes = sharedIndexes
	}
	l := &Log{dir: dir, cfg: cfg, fs: fs, files: files, indexes: indexes, log: log}
	l.mu.dirty = make(map[*segment]struct{})

	bases, txnFiles, err := listSegments(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", dir, err)
	}
	cleanPath := filepath.Join(dir, cleanShutdownFile)
	_, statErr := fs.Stat(cleanPath)
	clean := statErr == nil
	markerUnsynced := false
	if clean {
		// Once the log changes a crash must look unclean, durably: a
		// marker that came back would have the next Open trust this
		// active segment's index and skip the CRC checks of its tail. Not
		// before: while the log is as the clean close left it, a marker
		// that comes back tells the truth. So the removal is made durable
		// before the first change (dirDurableLocked), not here, which was
		// one fsync per partition at every start-up.
		if err := fs.Remove(cleanPath); err != nil {
			return nil, fmt.Errorf("log %s: %w", dir, err)
		}
		markerUnsynced = true
	}
	// A log that is one empty segment is new (WritePartitionMetadata lays
	// down the first segment) or was never written: there is nothing to
	// recover and nothing to report, but its directory's names are synced
	// before its first change, in case the sync that should have made
	// them durable never ran or failed.
	empty := false
	if !clean && len(bases) == 1 {
		if fi, err := fs.Stat(segmentPath(dir, bases[0], ".log")); err == nil && fi.Size() == 0 {
			empty = true
		}
	}
	syncMarker := func(int64) error {
		if !markerUnsynced {
			return nil
		}
		if err := fs.SyncDir(dir); err != nil {
			return fmt.Errorf("sync directory after removing %s: %w", cleanShutdownFile, err)
		}
		markerUnsynced = false
		return nil
	}
	removeTempFiles(fs, dir)
	removeOrphanTxnIndexes(fs, dir, bases, txnFiles)

	// Producer state: the newest snapshot, then replay of the batches after
	// it. Segments entirely below the snapshot need no replay. Replay also
	// rebuilds the aborted transaction indexes from the snapshot on.
	prods, snapAt := loadLatestSnapshot(fs, dir, 1<<62)
	txns := newTxnState(prods)
	txnDirChanged := false
	loadTime := time.Now().UnixMilli()
	var segs []*segment
	closeAll := func() {
		for _, o := range segs {
			o.close()
		}
	}
	for i, base := range bases {
		active := i == len(bases)-1
		var onBatch replayFunc
		var gen []AbortedTxn // entries replay makes for this segment
		nextBase := int64(1 << 62)
		if !active {
			nextBase = bases[i+1]
		}
		if snapAt < nextBase {
			onBatch = func(base int64, info recordbatch.Info, m *recordbatch.EndTxnMarker) {
				if base >= snapAt {
					if a, abort, _ := applyBatch(prods, &txns, info, m, base, base+int64(info.LastDelta), loadTime); abort {
						gen = append(gen, a)
					}
				}
			}
		}
		// A sealed segment found damaged is cut like the active one, but
		// the log must then end there: keeping the segments after it
		// would leave a hole that looks like a whole log. They go first,
		// newest first, so a crash part way never leaves one; this
		// replica fetches them again from its leader.
		cut := false
		var beforeCut func(int64) error
		if active {
			beforeCut = syncMarker // a cut changes the log
		} else {
			later := bases[i+1:]
			beforeCut = func(pos int64) error {
				log.Error().Int64("segment", base).Int64("position", pos).Int64("dropped_from", later[0]).
					Int("dropped_segments", len(later)).
					Msg("sealed segment is damaged: the log now ends at the damage; the segments after it are removed and must be fetched again from the leader")
				for k := len(later) - 1; k >= 0; k-- {
					exts := []string{".log", ".index", ".timeindex"}
					if txnFiles[later[k]] {
						exts = append(exts, txnIndexExt)
					}
					for _, ext := range exts {
						if err := fs.Remove(segmentPath(dir, later[k], ext)); err != nil && !os.IsNotExist(err) {
							return err
						}
					}
					if err := fs.SyncDir(dir); err != nil {
						return err
					}
				}
				cut = true
				return nil
			}
		}
		s, err := openSegment(fs, files, dir, base, active && !clean, active && !cfg.Compacted, !active, cfg.IndexIntervalBytes, onBatch, snapAt, beforeCut)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("log %s: %w", dir, err)
		}
		if txnFiles[base] || len(gen) > 0 {
			keep := int64(1 << 62) // a segment not replayed: all of its index is trusted
			if onBatch != nil {
				keep = snapAt
			}
			changed, err := s.loadTxnIndex(txnFiles[base], keep, gen)
			if err != nil {
				s.close()
				closeAll()
				if errors.Is(err, errBadTxnIndex) && !retried {
					// Damage (a trusted entry cannot be wrong otherwise):
					// rebuild every index from a replay of the whole log.
					log.Error().Err(err).Msg("aborted transaction index is damaged; replaying the whole log to rebuild it")
					for _, off := range must(listSnapshots(fs, dir)) {
						fs.Remove(segmentPath(dir, off, snapshotExt))
					}
					return open(dir, cfg, log, true)
				}
				return nil, fmt.Errorf("log %s: %w", dir, err)
			}
			txnDirChanged = txnDirChanged || changed
		}
		if cut {
			segs = append(segs, s)
			break
		}
		if !active && s.next > bases[i+1] {
			log.Warn().Int64("segment", base).Int64("next", s.next).Int64("following", bases[i+1]).
				Msg("segment runs past where the next begins")
		}
		segs = append(segs, s)
	}
	if txnDirChanged {
		// Rewritten (fsynced) or removed indexes: their names too, before
		// a snapshot can come to vouch for them.
		if err := fs.SyncDir(dir); err != nil {
			closeAll()
			return nil, fmt.Errorf("log %s: sync directory: %w", dir, err)
		}
	}
	if len(segs) == 0 {
		s, err := createSegment(fs, files, dir, 0)
		if err != nil {
			return nil, err
		}
		// A new log's directory may be new too, made by the caller (the
		// broker writes partition.metadata first) if not by
		// mkdirAllDurable: its name must be durable in its parent before
		// anything acknowledged lives in it. Once per partition.
		if err := fs.SyncDir(filepath.Dir(dir)); err != nil {
			s.close()
			return nil, fmt.Errorf("log %s: sync parent directory: %w", dir, err)
		}
		segs = append(segs, s)
	}
	last := segs[len(segs)-1]
	// Sealed segments hold no descriptor while idle: readers reopen them
	// through the cache. Nor their indexes: openSegment trusted their files
	// only after checking them against the log, or rebuilt and wrote them
	// durably; readers load them through the index cache.
	for _, s := range segs[:len(segs)-1] {
		s.unpinWriter()
		s.indexOnDisk()
	}
	if last.size > 0 {
		// The time-based roll counts from when this process first could
		// have appended, not from the zero time.
		last.firstAppend = time.Now()
	}
	if snapAt > last.next && !retried {
		// A snapshot from beyond the log (the log was truncated behind it):
		// rebuild from scratch rather than trust it.
		l.log.Warn().Int64("snapshot", snapAt).Int64("end", last.next).Msg("producer snapshot past log end; rebuilding")
		for _, s := range segs {
			s.close()
		}
		for _, off := range must(listSnapshots(fs, dir)) {
			fs.Remove(segmentPath(dir, off, snapshotExt))
		}
		return open(dir, cfg, log, true)
	}
	// The start DeleteRecords moved inside the first segment, if any
	// (logstart.go).
	start, restartAt := segs[0].base, int64(-1)
	saved, err := readLogStart(fs, dir)
	if err != nil {
		log.Warn().Err(err).Msg("unreadable log-start-offset; the log starts at its first segment")
		saved = -1
	}
	if saved > start {
		start = saved
	}
	if start > last.next {
		log.Warn().Int64("log_start_offset", start).Int64("end_offset", last.next).
			Msg("log start offset is past the log end; restarting the log empty there")
		restartAt, start = start, last.next
	}
	if err := l.loadEpochs(segs, start, last.next); err != nil {
		for _, s := range segs {
			s.close()
		}
		return nil, fmt.Errorf("log %s: %w", dir, err)
	}
	if !clean && last.size > 0 {
		// A process crash keeps the page cache: the active segment may
		// hold writes the dead process never fsynced, which read back as
		// if they were on the disk. The log's end is about to count as
		// durable (a replica's durable end feeds the high watermark), so
		// it must be: sync it now, or a power cut after this restart
		// loses what acks=all acknowledged on the strength of it. Sealed
		// segments were synced when they rolled. This also commits the
		// cut of a zero tail, which recovery did not sync.
		if err := last.f.SyncData(); err != nil {
			for _, s := range segs {
				s.close()
			}
			return nil, fmt.Errorf("log %s: segment %d: sync after unclean shutdown: %w", dir, last.base, err)
		}
	}
	l.mu.producers = prods
	l.mu.txns = txns
	l.mu.dirUnsynced = markerUnsynced || empty
	l.mu.hadTxnIndex = len(txnFiles) > 0 || txnDirChanged
	l.end.Store(last.next)
	l.durable.Store(last.next)
	l.startOffset.Store(start)
	l.mu.savedStart = saved
	l.publishSegs(segs)
	l.publishTxnsLocked()
	if len(segs) > 1 && segs[1].base <= start && restartAt < 0 {
		// Segments wholly below the start that a crash brought back
		// (their removal is not synced): they go again.
		l.mu.Lock()
		_, err := l.dropBelowLocked(start)
		l.mu.Unlock()
		if err != nil {
			log.Warn().Err(err).Msg("removing segments below the log start offset")
		}
	}
	if restartAt >= 0 {
		l.flushMu.Lock()
		l.mu.Lock()
		err := l.truncateFullyLocked(restartAt, restartAt) // syncs the marker's removal first
		l.mu.Unlock()
		l.flushMu.Unlock()
		if err != nil {
			for _, s := range l.segments() {
				s.close()
			}
			return nil, err
		}
	}
	if !clean && len(bases) > 0 && !empty {
		log.Info().Int64("end_offset", last.next).Int("segments", len(segs)).Msg("recovered log after unclean shutdown")
	}
	return l, nil
}

func must[T any](v T, _ error) T { return v }

// listSegments returns the base offsets of the segments in dir, ascending,
// and those of the aborted transaction indexes there (nil when there are
// none, as in every log without aborted transactions).
func listSegments(fs FS, dir string) ([]int64, map[int64]bool, error) {
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var bases []int64
	var txnFiles map[int64]bool
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		isTxn := false
		if !ok {
			if name, isTxn = strings.CutSuffix(e.Name(), txnIndexExt); !isTxn {
				continue
			}
		}
		if len(name) != 20 {
			continue
		}
		base, err := strconv.ParseInt(name, 10, 64)
		switch {
		case err != nil:
		case isTxn:
			if txnFiles == nil {
				txnFiles = map[int64]bool{}
			}
			txnFiles[base] = true
		default:
			bases = append(bases, base)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, txnFiles, nil
}

// removeOrphanTxnIndexes removes the aborted transaction indexes whose
// segment is gone (a crash in the middle of removing it: see
// segment.remove), so a later segment of the same base cannot take one up.
func removeOrphanTxnIndexes(fs FS, dir string, bases []int64, txnFiles map[int64]bool) {
	for base := range txnFiles {
		if _, ok := slices.BinarySearch(bases, base); !ok {
			fs.Remove(segmentPath(dir, base, txnIndexExt))
			delete(txnFiles, base)
		}
	}
}

func removeTempFiles(fs FS, dir string) {
	ents, _ := fs.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") || strings.HasSuffix(e.Name(), cleanedExt) {
			fs.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// indexesOf returns the indexes of segment s in its published state st:
// the active segment's, or a sealed one's from the index cache.
func (l *Log) indexesOf(s *segment, st *segState) ([]offsetEntry, []timeEntry) {
	if !st.onDisk {
		return st.offs, st.times
	}
	return l.indexes.get(s, st, &l.log)
}

// writerIndexes is indexesOf for the writer, whose state of s is current.
// REQUIRES: l.mu held.
func (l *Log) writerIndexes(s *segment) ([]offsetEntry, []timeEntry) {
	if !s.ixOnDisk {
		return s.ix.offs, s.ix.times
	}
	return l.indexes.get(s, s.pub.Load(), &l.log) // a sealed segment's published state is the writer's
}

// indexInMemory brings a sealed segment's indexes back into its ix, for
// the writer to change them (a truncation that makes it the active
// segment again). Copies: the cache's slices are shared with readers.
// REQUIRES: l.mu held.
func (l *Log) indexInMemory(s *segment) {
	if !s.ixOnDisk {
		return
	}
	offs, times := l.writerIndexes(s)
	s.ix = index{offs: slices.Clone(offs), times: slices.Clone(times)}
	s.ixOnDisk = false
	l.indexes.drop(s)
}

// publishSegs makes the segment list and each segment's state visible to
// readers. REQUIRES: l.mu held (or no concurrent access, during Open).
func (l *Log) publishSegs(segs []*segment) {
	for _, s := range segs {
		s.publish()
	}
	l.view.Lock()
	l.view.segs = segs
	l.view.Unlock()
}

// segments returns the current segment list; the caller must not modify it.
func (l *Log) segments() []*segment {
	l.view.RLock()
	defer l.view.RUnlock()
	return l.view.segs
}

// EndOffset is the offset the next appended record gets (the LEO).
func (l *Log) EndOffset() int64 { return l.end.Load() }

// StartOffset is the first offset still in the log: reads below it are
// ErrOffsetOutOfRange. It may lie inside the first segment
// (AdvanceStartOffset), whose batch holding it is then read whole.
func (l *Log) StartOffset() int64 { return l.startOffset.Load() }

// DurableOffset is the end of the fsynced prefix.
func (l *Log) DurableOffset() int64 { return l.durable.Load() }

// AppendResult says where a batch went.
type AppendResult struct {
	BaseOffset, LastOffset int64
	LogAppendTime          int64 // -1 unless the topic uses LogAppendTime
	Duplicate              bool  // a retry of a batch already in the log
}

// Append appends one batch that recordbatch.Validate accepted, as the leader: it
// assigns the offsets and stamps leaderEpoch (-1: none). The bytes are
// modified in place (offsets, leader epoch, maybe the timestamp) and must not
// be used by the caller afterwards. now is the append wall-clock time in ms.
//
// The first batch of a leader epoch above every cached one records
// (leaderEpoch, its base offset) in the epoch cache; a leaderEpoch below the
// latest cached one is ErrStaleLeaderEpoch (a write from a leadership that
// has ended, which would break followers' truncation).
//
// Producer checks, in Kafka's order: a retry of one of the producer's last
// five batches is a Duplicate; an epoch older than the producer's is
// ErrInvalidEpoch; a sequence out of order is ErrOutOfOrderSeq; a
// non-transactional batch from a producer whose transaction is open is
// ErrInvalidTxnState. A transactional batch opens the producer's
// transaction if none is open (txn.go). A control batch is ErrInvalidRecord:
// markers are the leader's to write (AppendMarker).
func (l *Log) Append(batch []byte, info recordbatch.Info, leaderEpoch int32, now int64) (AppendResult, error) {
	if info.Control {
		// Kafka's "Clients are not allowed to write control records".
		return AppendResult{}, fmt.Errorf("%w: a produced batch may not be a control batch (markers are written with AppendMarker)", ErrInvalidRecord)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return AppendResult{}, err
	}
	dup, err := l.mu.producers.check(info)
	if err != nil {
		return AppendResult{}, err
	}
	if dup != nil {
		return AppendResult{BaseOffset: dup.firstOffset, LastOffset: dup.lastOffset, LogAppendTime: -1, Duplicate: true}, nil
	}
	return l.appendLocked(batch, info, nil, leaderEpoch, now)
}

// appendLocked is Append and AppendMarker once the producer checks pass: m is
// a control batch's marker, nil for data.
// REQUIRES: l.mu held.
func (l *Log) appendLocked(batch []byte, info recordbatch.Info, m *recordbatch.EndTxnMarker, leaderEpoch int32, now int64) (AppendResult, error) {
	if err := l.dirDurableLocked(); err != nil {
		return AppendResult{}, err
	}
	s := l.active()
	base := l.end.Load()
	epochs, newEpoch, err := l.epochCache().next(leaderEpoch, base, false)
	if err != nil {
		return AppendResult{}, err
	}
	if l.shouldRoll(s, len(batch), info, now) {
		if s, err = l.rollLocked(base, now); err != nil {
			return AppendResult{}, err
		}
	}
	if newEpoch || l.epochPending.Load() {
		// The epoch is on disk before any batch of it (epochs.go).
		if err := l.saveEpochsLocked(epochs); err != nil {
			return AppendResult{}, err
		}
	}
	lat := int64(-1)
	if l.cfg.LogAppendTime {
		lat = now
		info.MaxTimestamp = now
	}
	recordbatch.Stamp(batch, base, leaderEpoch, lat)
	s.ensureSpace(len(batch), max(l.cfg.SegmentBytes, s.size+int64(len(batch))))
	if _, err := s.f.WriteAt(batch, s.size); err != nil {
		// The file may hold part of the batch: cut it off, and stop taking
		// appends if even that fails, so nothing is written after garbage.
		if terr := s.f.Truncate(s.size); terr != nil {
			l.mu.failed = fmt.Errorf("segment %d: write failed (%v) and truncate failed: %w", s.base, err, terr)
		}
		return AppendResult{}, fmt.Errorf("segment %d: append: %w", s.base, err)
	}
	last := base + int64(info.LastDelta)
	s.noteAppended(s.size, len(batch), last, info.MaxTimestamp, leaderEpoch, now, l.cfg.IndexIntervalBytes)
	l.mu.dirty[s] = struct{}{}
	err = l.applyLocked(s, info, m, base, last, now)
	s.publish()
	l.end.Store(last + 1)
	return AppendResult{BaseOffset: base, LastOffset: last, LogAppendTime: lat}, err
}

// applyLocked records a batch just written to s at [base, last] in the
// producer and transaction state, and an abort in s's transaction index.
// The batch is in the log whatever it returns: an error is the index
// write's, after which the log is failed (see txnIndex.add).
// REQUIRES: l.mu held.
func (l *Log) applyLocked(s *segment, info recordbatch.Info, m *recordbatch.EndTxnMarker, base, last, now int64) error {
	a, abort, changed := applyBatch(l.mu.producers, &l.mu.txns, info, m, base, last, now)
	if !changed {
		return nil
	}
	l.publishTxnsLocked()
	if !abort {
		return nil
	}
	l.mu.hadTxnIndex = true
	if err := s.addAborted(a); err != nil {
		l.mu.failed = err
		return err
	}
	return nil
}

// REQUIRES: l.mu held.
func (l *Log) active() *segment {
	l.view.RLock()
	defer l.view.RUnlock()
	return l.view.segs[len(l.view.segs)-1]
}

// REQUIRES: l.mu held.
func (l *Log) shouldRoll(s *segment, n int, info recordbatch.Info, now int64) bool {
	return l.rollNeeded(s, s.size, l.end.Load(), s.firstAppend.UnixMilli(), n, info.LastDelta, now)
}

// rollNeeded says whether a batch of n bytes and lastDelta, appended at
// offset end, must go to a new segment when s holds size bytes and took its
// first append at firstAppendMs.
func (l *Log) rollNeeded(s *segment, size, end, firstAppendMs int64, n int, lastDelta int32, now int64) bool {
	if size == 0 {
		return false
	}
	return size+int64(n) > l.cfg.SegmentBytes ||
		now-firstAppendMs >= l.cfg.SegmentMs ||
		// relative offsets in the indexes are int32
		end+int64(lastDelta)-s.base > 1<<31-2 ||
		size+int64(n) > 1<<31-1
}

// dirDurableLocked makes the directory's entries durable (Open's removal
// of the clean-shutdown marker, a new log's names), once, before the
// first write or truncation changes the log.
// REQUIRES: l.mu held.
func (l *Log) dirDurableLocked() error {
	if !l.mu.dirUnsynced {
		return nil
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("log %s: sync directory: %w", l.dir, err)
	}
	l.mu.dirUnsynced = false
	return nil
}

// writableLocked reports why the log cannot be changed, if it cannot.
// REQUIRES: l.mu held.
func (l *Log) writableLocked() error {
	if l.mu.closed {
		return ErrClosed
	}
	return l.mu.failed
}

// rollLocked starts a new segment at base. The old segment and its indexes
// are fsynced first, so that after a crash only the active segment can need
// recovery; this is the one fsync under l.mu, once per segment. A producer
// snapshot is written so recovery replays at most the active segment.
// REQUIRES: l.mu held.
func (l *Log) rollLocked(base, now int64) (*segment, error) {
	// A roll is fsyncs (the old segment, its index files, the new
	// segment's directory entry, a producer snapshot) under mu: it counts
	// as one long sync for SyncStalledFor, or a disk that stalls in the
	// middle of it would hold every append unseen.
	if l.syncSince.CompareAndSwap(0, time.Now().UnixMilli()) {
		defer l.syncSince.Store(0)
	}
	old := l.active()
	if err := old.trimTail(); err != nil {
		l.mu.failed = err
		return nil, err
	}
	if err := old.f.SyncData(); err != nil {
		l.mu.failed = fmt.Errorf("segment %d: sync at roll: %w", old.base, err)
		return nil, l.mu.failed
	}
	// The sealed segment's indexes go to their files now, durably, so a
	// restart trusts them; createSegment's directory sync below makes
	// their names durable too.
	if err := old.writeIndexFiles(true); err != nil {
		l.mu.failed = fmt.Errorf("segment %d: index at roll: %w", old.base, err)
		return nil, l.mu.failed
	}
	// Sealed, its indexes live in its files. The cache starts with them,
	// for the readers near the log's end, keeping what they hold and not
	// the spare capacity appends left. Readers holding the old slices keep
	// reading them: entries never change.
	ix := old.indexOnDisk()
	l.indexes.install(old, slices.Clone(ix.offs), slices.Clone(ix.times))
	old.publish()
	// Before the snapshot at base vouches for its entries (txnindex.go);
	// createSegment's directory sync makes its name durable.
	if err := old.syncTxnIndex(); err != nil {
		l.mu.failed = err
		return nil, err
	}
	if l.mu.hadTxnIndex {
		if err := l.fs.Remove(segmentPath(l.dir, base, txnIndexExt)); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("segment %d: %w", base, err)
		}
	}
	s, err := createSegment(l.fs, l.files, l.dir, base)
	if err != nil {
		return nil, err
	}
	// Sealed: no more writes, so no descriptor while idle (the aborted
	// transaction index reopens if a truncation cuts it).
	old.unpinWriter()
	old.closeTxnIndex()
	l.mu.producers.expire(now, l.producerTTL())
	if err := writeSnapshot(l.fs, l.dir, l.mu.producers, base, l.snapshotKeepAboveLocked()); err != nil {
		l.log.Warn().Err(err).Msg("producer snapshot at roll failed; recovery will replay more")
	}
	l.view.RLock()
	segs := append(append([]*segment(nil), l.view.segs...), s)
	l.view.RUnlock()
	l.publishSegs(segs)
	l.log.Debug().Int64("segment", base).Int64("previous", old.base).Msg("rolled segment")
	return s, nil
}

// Flush makes every batch appended before the call durable. Concurrent
// callers share one fdatasync: whoever holds flushMu syncs everything written
// so far, and callers queued behind it usually find their data covered.
// FlushGroup does the same for many logs at once.
func (l *Log) Flush() error {
	target := l.end.Load()
	if l.durable.Load() >= target {
		return nil
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	end, dirty, done, err := l.flushBegin(target)
	if done || err != nil {
		return err
	}
	if err := l.syncSegments(dirty); err != nil {
		return err
	}
	l.durable.Store(end)
	return nil
}

// flushBegin takes what a flush must sync: the end it makes durable and the
// segments written since the last flush (done: target is durable already).
// REQUIRES: flushMu held, until the flush publishes its end or fails.
func (l *Log) flushBegin(target int64) (end int64, dirty []*segment, done bool, err error) {
	if l.durable.Load() >= target {
		return 0, nil, true, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.failed != nil {
		return 0, nil, false, l.mu.failed
	}
	end = l.end.Load()
	dirty = make([]*segment, 0, len(l.mu.dirty))
	for s := range l.mu.dirty {
		dirty = append(dirty, s)
	}
	clear(l.mu.dirty)
	return end, dirty, false, nil
}

// timedSync runs sync, an fsync of one of the log's files, with
// syncSince showing when it began (unless an older one still runs).
func (l *Log) timedSync(sync func() error) error {
	began := l.syncSince.CompareAndSwap(0, time.Now().UnixMilli())
	defer func() {
		if began {
			l.syncSince.Store(0)
		}
	}()
	return sync()
}

// SyncStalledFor is how long the fsync of this log running longest has
// been running at now (unix ms), 0 when none runs; a roll and a
// leader-epoch checkpoint, fsyncs under the log's lock, count whole. The broker resigns a
// leadership whose log's fsync stays stuck (fjord.log.flush.stall.max.ms):
// its acks=all producers would otherwise time out for as long as the disk
// hangs.
func (l *Log) SyncStalledFor(now int64) time.Duration {
	since := l.syncSince.Load()
	if since == 0 || now <= since {
		return 0
	}
	return time.Duration(now-since) * time.Millisecond
}

// Failed is why the log takes no more appends (a write it could not undo,
// or a failed fsync: the page cache cannot be trusted after one), nil
// while it takes them. Sticky until the log is closed and opened again.
func (l *Log) Failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.failed
}

// Fail stops the log taking appends, for err, unless it has already
// failed: the broker's answer to a disk that reported an I/O error (EIO)
// on a write the log could undo, which it no longer trusts with more.
func (l *Log) Fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.failed == nil {
		l.mu.failed = err
	}
}

// syncSegments fdatasyncs each segment. REQUIRES: flushMu held.
func (l *Log) syncSegments(dirty []*segment) error {
	for _, s := range dirty {
		// A pin of its own: the segment may be sealed, and its file
		// evicted, meanwhile (a roll syncs it first).
		f, err := s.h.acquire()
		if err == nil {
			err = l.timedSync(f.SyncData)
			s.h.release()
		}
		if err != nil {
			if s.removed.Load() {
				continue // deleted by retention while we synced: nothing to keep
			}
			// After a failed fsync the page cache can't be trusted
			// (fsyncgate): stop the log rather than ack data of unknown fate.
			err = fmt.Errorf("segment %d: fdatasync: %w", s.base, err)
			l.mu.Lock()
			l.mu.failed = err
			l.mu.Unlock()
			return err
		}
	}
	return nil
}

// Read returns whole batches starting with the one containing offset and
// ending before limit (the high watermark, for consumers). It returns at most
// maxBytes, except that the first batch is always returned whole so a batch
// larger than maxBytes cannot stall a consumer. Reads stay within one segment.
// The result uses dst's storage when it is large enough (dst may be nil);
// the caller owns it.
//
// Every batch returned has passed its CRC and follows the one before it:
// bytes damaged on disk after they were written (a sealed segment is not
// re-checked at startup) are never handed out. Batches before a bad one are
// returned; a read that starts at a bad one fails with a *CorruptLogError.
func (l *Log) Read(offset int64, maxBytes int, limit int64, dst []byte) ([]byte, error) {
	for try := 0; ; try++ {
		gen := l.truncations.Load()
		if offset < l.startOffset.Load() || offset > l.end.Load() {
			return nil, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, l.startOffset.Load(), l.end.Load())
		}
		if offset >= limit {
			return nil, nil
		}
		b, err := l.readOnce(offset, maxBytes, limit, dst)
		if err == nil {
			return b, nil
		}
		// A segment removed or replaced while this read held it, and its
		// file closed by then: the current list has what replaced it.
		if try < 2 && errors.Is(err, errFileRetired) {
			continue
		}
		if gen&1 == 1 || l.truncations.Load() != gen {
			// A truncation ran meanwhile: the bytes read, where the index
			// of before said a batch starts, may be its cut and what was
			// appended after it (a header that does not parse, a length
			// past the file's end). Look again; if truncations keep
			// racing, say so rather than report damage.
			if try < 2 {
				continue
			}
			return nil, fmt.Errorf("%w: reading at %d: %v", ErrTruncatedDuringRead, offset, err)
		}
		return nil, err
	}
}

// readOnce is Read on the segment list of the moment.
func (l *Log) readOnce(offset int64, maxBytes int, limit int64, dst []byte) ([]byte, error) {
	segs := l.segments()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
	if i < 0 {
		return nil, fmt.Errorf("%w: %d before first segment", ErrOffsetOutOfRange, offset)
	}
	for ; i < len(segs); i++ {
		s := segs[i]
		st := s.pub.Load()
		size := st.size
		offs, _ := l.indexesOf(s, st)
		pos, err := s.findBatch(offs, offset, size)
		if err != nil {
			return nil, err
		}
		if pos >= size {
			continue // offset is past this segment's end: try the next one
		}
		return s.readBatches(dst, offset, pos, size, maxBytes, limit)
	}
	return nil, nil
}

// readBatches reads whole, verified batches from pos (the batch holding
// offset), stopping before limit, at size, or once maxBytes is exceeded (the
// first batch always whole).
func (s *segment) readBatches(dst []byte, offset, pos, size int64, maxBytes int, limit int64) ([]byte, error) {
	n := int(min(int64(max(maxBytes, recordbatch.HeaderLen)), size-pos))
	buf, err := s.readInto(dst, pos, n)
	if err != nil {
		return nil, err
	}
	var out int
	next := s.base // the lowest base offset the next batch may have
	for out+recordbatch.HeaderLen <= len(buf) {
		info, err := recordbatch.ParseHeader(buf[out:])
		if err != nil {
			return s.corruptAt(buf, out, pos, offset, next, err.Error())
		}
		base := recordbatch.BaseOffset(buf[out:])
		if base < next || (out == 0 && recordbatch.LastOffset(buf) < offset) {
			return s.corruptAt(buf, out, pos, offset, next, fmt.Sprintf("base offset %d out of sequence", base))
		}
		if base >= limit || recordbatch.LastOffset(buf[out:]) >= limit {
			break
		}
		if out+info.Bytes > len(buf) {
			if out == 0 && pos+int64(info.Bytes) <= size {
				// One oversized batch, whole.
				if buf, err = s.readInto(dst, pos, info.Bytes); err != nil {
					return nil, err
				}
				if len(buf) < info.Bytes {
					// The file ends before the size this read was given:
					// cut meanwhile (a truncation), not damage.
					return nil, fmt.Errorf("segment %d: read at %d: %d of %d bytes, the file is shorter than the segment", s.base, pos, len(buf), info.Bytes)
				}
				if err := recordbatch.CheckCRC(buf); err != nil {
					return s.corruptAt(buf, 0, pos, offset, next, err.Error())
				}
				return buf, nil
			}
			break
		}
		if err := recordbatch.CheckCRC(buf[out : out+info.Bytes]); err != nil {
			return s.corruptAt(buf, out, pos, offset, next, err.Error())
		}
		next = recordbatch.LastOffset(buf[out:]) + 1
		out += info.Bytes
	}
	if out == 0 && len(buf) > 0 && len(buf) < recordbatch.HeaderLen {
		return nil, nil
	}
	return buf[:out], nil
}

// corruptAt ends a read at a bad batch found at buf[out:]: the good batches
// before it are the result; if there are none, the read fails and says the
// log is untrustworthy from the requested offset (the first batch) or from
// next (where a later one should have started).
func (s *segment) corruptAt(buf []byte, out int, pos, offset, next int64, reason string) ([]byte, error) {
	if out > 0 {
		return buf[:out], nil
	}
	return nil, &CorruptLogError{Segment: s.base, Position: pos, Offset: max(offset, next), Reason: reason}
}

func (l *Log) producerTTL() int64 {
	if l.cfg.ProducerExpirationMs > 0 {
		return l.cfg.ProducerExpirationMs
	}
	return DefaultProducerExpirationMs
}
