package compattests

// T4 of the reliability plan (crash recovery from a damaged disk): a node
// is killed (SIGKILL) while the producer writes, its partition directories
// are damaged offline, and it is restarted on the same data. Recovery must
// cut a torn or corrupt tail of the active segment at the last good batch,
// rebuild indexes and the leader-epoch checkpoint, and the node must rejoin
// as a follower and fetch back what it lost; no acknowledged record may be
// lost anywhere, and no node may ever serve a batch that fails its CRC.
//
// One cluster (three nodes, fault_cluster_test.go) takes, in turn, every
// case below, each on a victim chosen as the leader of the busiest partition
// or one of its followers (diskCases gives each case its role; a follower
// victim is the one hit least so far, never one left with c2's damage while
// another will do, so that damage lasts until the final reads instead of
// being found by a later full recovery). For each case: SIGKILL the victim
// mid-write, damage every partition directory of the topic on it (each
// change is logged: file, byte range, old and new bytes), restart it, wait
// until every partition is led with a full ISR again, and check the
// victim's log: each partition's "recovered log after unclean shutdown"
// line must give the end offset the damage calls for (the base offset of
// the first damaged batch of the active segment, or the intact end when the
// damage is elsewhere), plus the case's own evidence (rebuilt index files,
// a rebuilt leader-epoch-checkpoint).
//
//	a   truncate the active segment inside its last batch
//	b   flip one byte in the records of the last batch (>= 61 bytes in)
//	c1  flip one byte in the records of a middle batch of the active segment
//	c2  flip one byte in the records of a middle batch of a SEALED segment
//	    (startup recovery does not read sealed segments: only a check on
//	    the read path can keep the node from serving or leading with it)
//	d   zero the last 4 KiB of the active segment's batches
//	e   delete every .index and .timeindex file
//	f   truncate leader-epoch-checkpoint to half its length
//	c3  c2, and delete that segment's index files: recovery then reads the
//	    sealed segment in full, finds the damage and must cut the log there
//	    (dropping the later segments: keeping them would leave a hole)
//
// Once all cases are done the producer stops, and (1) the usual history
// check runs over everything read back through the leaders, and (2) every
// partition is read from each node's own replica with Kafka's debugging
// consumer (a raw Fetch v12 with ReplicaID -2, served by followers too, up
// to the replica's high watermark): every batch must pass its CRC-32C, the
// three copies must hold the same (offset, key, value) sequence up to the
// same end, and each must hold every acknowledged record.
//
// FJORD_FAULTS=short (default): each case once, about 55 s (20 s more when
// the replicas fail to converge); full: two rounds with the roles swapped
// in the second, about 3 min. FJORD_DISK_CASES picks cases for bisecting,
// e.g. "c2" or "a,c2:leader,e:follower" (a role after a colon overrides
// the case's own). FJORD_FAULT_LOGS keeps the logs as in the other fault
// tests; FJORD_DISK_DEBUG=1 prints every debugging-consumer fetch of the
// final replica reads (offset asked, bytes and first offset returned).

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	diskPartitions   = 3
	diskSegmentBytes = 16 << 10 // several sealed segments per partition within seconds
	diskDown         = time.Second
	diskRecoveredMsg = "recovered log after unclean shutdown"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// diskCase is one kind of damage.
type diskCase struct {
	name string
	role string // "leader" or "follower": which replica of the busiest partition is the victim
	what string
	// damage changes one partition directory of a killed node. It returns
	// the changes made (for the log) and what recovery must report, or
	// skip != "" when the directory does not allow this damage now.
	damage func(dir string) (changes []string, want diskExpect, skip string, err error)
}

// diskExpect is what the victim must log for a damaged partition once
// restarted.
type diskExpect struct {
	end      int64 // the end offset recovery must report
	truncate bool  // end is the first damaged batch: recovery must cut there
	epochs   bool  // a rebuilt leader-epoch-checkpoint must be logged
	indexes  bool  // every segment must have its index files again
}

var diskCases = []diskCase{
	{"a", "leader", "truncate inside the last batch of the active segment", damageTruncateLast},
	{"b", "follower", "flip a byte in the records of the last batch", damageFlipLast},
	{"c1", "leader", "flip a byte in a middle batch of the active segment", damageFlipMiddleActive},
	{"c2", "follower", "flip a byte in a middle batch of a sealed segment", damageFlipMiddleSealed},
	{"d", "leader", "zero the last 4 KiB of the active segment", damageZeroTail},
	{"e", "follower", "delete every .index and .timeindex file", damageDeleteIndexes},
	{"f", "leader", "truncate leader-epoch-checkpoint to half its length", damageTruncateEpochs},
	{"c3", "follower", "flip a byte in a middle batch of a sealed segment and delete that segment's index files", damageFlipMiddleSealedNoIndex},
}

// selectDiskCases returns the cases FJORD_DISK_CASES names (all if unset).
func selectDiskCases(t *testing.T) []diskCase {
	t.Helper()
	v := strings.TrimSpace(os.Getenv("FJORD_DISK_CASES"))
	if v == "" || v == "all" {
		return slices.Clone(diskCases)
	}
	var out []diskCase
	for _, f := range strings.Split(v, ",") {
		name, role, _ := strings.Cut(strings.TrimSpace(f), ":")
		i := slices.IndexFunc(diskCases, func(c diskCase) bool { return c.name == name })
		if i < 0 || (role != "" && role != "leader" && role != "follower") {
			t.Fatalf("FJORD_DISK_CASES=%q: %q is not a case (a b c1 c2 d e f, optionally :leader or :follower)", v, f)
		}
		c := diskCases[i]
		if role != "" {
			c.role = role
		}
		out = append(out, c)
	}
	return out
}

// ---- the on-disk log, read the way recovery reads it ----

// diskBatch is one well-formed batch of a segment file.
type diskBatch struct {
	pos, size  int64
	base, last int64
}

// diskSegment is one .log file: its valid prefix of batches (each with a
// good length, magic 2 and CRC) and what follows it.
type diskSegment struct {
	path     string
	base     int64
	fileSize int64
	batches  []diskBatch
	valid    int64 // end of the valid prefix
	data     []byte
}

// tail describes the bytes after the valid prefix: nothing, zeros (a
// preallocated tail) or something else (a torn or bad batch).
func (s diskSegment) tail() string {
	rest := s.data[s.valid:]
	if len(rest) == 0 {
		return "no bytes after the last batch"
	}
	if bytes.Count(rest, []byte{0}) == len(rest) {
		return fmt.Sprintf("%d zero bytes after the last batch (preallocated)", len(rest))
	}
	return fmt.Sprintf("%d bytes after the last batch, not all zero (a torn or bad batch)", len(rest))
}

// end is the offset after the segment's last valid batch.
func (s diskSegment) end() int64 {
	if n := len(s.batches); n > 0 {
		return s.batches[n-1].last + 1
	}
	return s.base
}

func scanDiskSegment(path string, base int64) (diskSegment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return diskSegment{}, err
	}
	s := diskSegment{path: path, base: base, fileSize: int64(len(data)), data: data}
	pos := 0
	for pos+61 <= len(data) {
		length := int32(binary.BigEndian.Uint32(data[pos+8:]))
		if length < 49 || pos+12+int(length) > len(data) || data[pos+16] != 2 {
			break
		}
		size := 12 + int(length)
		if crc32.Checksum(data[pos+21:pos+size], castagnoli) != binary.BigEndian.Uint32(data[pos+17:]) {
			break
		}
		b := int64(binary.BigEndian.Uint64(data[pos:]))
		s.batches = append(s.batches, diskBatch{pos: int64(pos), size: int64(size), base: b,
			last: b + int64(int32(binary.BigEndian.Uint32(data[pos+23:])))})
		pos += size
	}
	s.valid = int64(pos)
	return s, nil
}

// diskSegments scans every segment of a partition directory, oldest first.
func diskSegments(dir string) ([]diskSegment, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || len(name) != 20 {
			continue
		}
		if b, err := strconv.ParseInt(name, 10, 64); err == nil {
			bases = append(bases, b)
		}
	}
	slices.Sort(bases)
	var out []diskSegment
	for _, b := range bases {
		s, err := scanDiskSegment(filepath.Join(dir, fmt.Sprintf("%020d.log", b)), b)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no segments", dir)
	}
	return out, nil
}

// activeSegment returns the directory's segments and the active one.
func activeSegment(dir string) ([]diskSegment, diskSegment, error) {
	segs, err := diskSegments(dir)
	if err != nil {
		return nil, diskSegment{}, err
	}
	return segs, segs[len(segs)-1], nil
}

func segName(s diskSegment) string { return filepath.Base(s.path) }

// flipRecordByte flips (XOR 0xff) the byte in the middle of b's records
// (61 bytes or more into the batch) in s's file.
func flipRecordByte(s diskSegment, b diskBatch) (string, error) {
	if b.size <= 61 {
		return "", fmt.Errorf("batch at %d has no records area (%d bytes)", b.pos, b.size)
	}
	at := b.pos + 61 + (b.size-61)/2
	old := s.data[at]
	f, err := os.OpenFile(s.path, os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{old ^ 0xff}, at); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: byte %d (batch %d-%d at bytes [%d,%d), %d into it) 0x%02x -> 0x%02x; %s",
		segName(s), at, b.base, b.last, b.pos, b.pos+b.size, at-b.pos, old, old^0xff, s.tail()), nil
}

func damageTruncateLast(dir string) ([]string, diskExpect, string, error) {
	_, s, err := activeSegment(dir)
	if err != nil || len(s.batches) == 0 {
		return nil, diskExpect{}, "active segment " + segName(s) + " holds no batch", err
	}
	b := s.batches[len(s.batches)-1]
	cut := b.pos + b.size/2
	if err := os.Truncate(s.path, cut); err != nil {
		return nil, diskExpect{}, "", err
	}
	return []string{fmt.Sprintf("%s: truncated from %d bytes (%d valid; %s) to %d, inside the last batch %d-%d at bytes [%d,%d)",
		segName(s), s.fileSize, s.valid, s.tail(), cut, b.base, b.last, b.pos, b.pos+b.size)}, diskExpect{end: b.base, truncate: true}, "", nil
}

func damageFlipLast(dir string) ([]string, diskExpect, string, error) {
	_, s, err := activeSegment(dir)
	if err != nil || len(s.batches) == 0 {
		return nil, diskExpect{}, "active segment " + segName(s) + " holds no batch", err
	}
	b := s.batches[len(s.batches)-1]
	ch, err := flipRecordByte(s, b)
	return []string{ch}, diskExpect{end: b.base, truncate: true}, "", err
}

func damageFlipMiddleActive(dir string) ([]string, diskExpect, string, error) {
	_, s, err := activeSegment(dir)
	if err != nil || len(s.batches) < 3 {
		return nil, diskExpect{}, fmt.Sprintf("active segment %s holds %d batches, fewer than 3", segName(s), len(s.batches)), err
	}
	b := s.batches[len(s.batches)/2]
	ch, err := flipRecordByte(s, b)
	return []string{fmt.Sprintf("%s (batch %d of %d)", ch, len(s.batches)/2+1, len(s.batches))}, diskExpect{end: b.base, truncate: true}, "", err
}

// flipNewestSealed flips a record byte in the middle batch of the newest
// sealed segment (the one a lagging follower is likeliest to fetch from).
// skip says why it could not, if it could not.
func flipNewestSealed(dir string) (s diskSegment, b diskBatch, active diskSegment, change, skip string, err error) {
	segs, active, err := activeSegment(dir)
	if err != nil {
		return s, b, active, "", "", err
	}
	if len(segs) < 2 || len(segs[len(segs)-2].batches) == 0 {
		return s, b, active, "", fmt.Sprintf("no sealed segment with batches (%d segments)", len(segs)), nil
	}
	s = segs[len(segs)-2]
	b = s.batches[len(s.batches)/2]
	change, err = flipRecordByte(s, b)
	return s, b, active, change, "", err
}

func damageFlipMiddleSealed(dir string) ([]string, diskExpect, string, error) {
	s, _, active, ch, skip, err := flipNewestSealed(dir)
	if skip != "" || err != nil {
		return nil, diskExpect{}, skip, err
	}
	return []string{fmt.Sprintf("%s (sealed; batch %d of %d)", ch, len(s.batches)/2+1, len(s.batches))}, diskExpect{end: active.end()}, "", nil
}

// damageFlipMiddleSealedNoIndex is c2 with the damaged segment's index
// files gone, so that recovery reads that sealed segment in full: it must
// cut the log at the damage (dropping the later segments, which would
// otherwise leave a hole) and fetch the rest back from the leader.
func damageFlipMiddleSealedNoIndex(dir string) ([]string, diskExpect, string, error) {
	s, b, _, ch, skip, err := flipNewestSealed(dir)
	if skip != "" || err != nil {
		return nil, diskExpect{}, skip, err
	}
	for _, ext := range []string{".index", ".timeindex"} {
		if err := os.Remove(strings.TrimSuffix(s.path, ".log") + ext); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, diskExpect{}, "", err
		}
	}
	return []string{fmt.Sprintf("%s (sealed; batch %d of %d; its .index and .timeindex deleted)",
		ch, len(s.batches)/2+1, len(s.batches))}, diskExpect{end: b.base, truncate: true}, "", nil
}

func damageZeroTail(dir string) ([]string, diskExpect, string, error) {
	_, s, err := activeSegment(dir)
	if err != nil || len(s.batches) == 0 {
		return nil, diskExpect{}, "active segment " + segName(s) + " holds no batch", err
	}
	from := max(0, s.valid-4096)
	i := slices.IndexFunc(s.batches, func(b diskBatch) bool { return b.pos+b.size > from })
	f, err := os.OpenFile(s.path, os.O_WRONLY, 0)
	if err != nil {
		return nil, diskExpect{}, "", err
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, s.valid-from), from); err != nil {
		return nil, diskExpect{}, "", err
	}
	return []string{fmt.Sprintf("%s: zeroed bytes [%d,%d) of %d valid (%s), batches %d-%d (%d of %d damaged, the first from byte %d)",
			segName(s), from, s.valid, s.valid, s.tail(), s.batches[i].base, s.batches[len(s.batches)-1].last,
			len(s.batches)-i, len(s.batches), s.batches[i].pos)},
		diskExpect{end: s.batches[i].base, truncate: true}, "", nil
}

func damageDeleteIndexes(dir string) ([]string, diskExpect, string, error) {
	_, active, err := activeSegment(dir)
	if err != nil {
		return nil, diskExpect{}, "", err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, diskExpect{}, "", err
	}
	var gone []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".index") || strings.HasSuffix(e.Name(), ".timeindex") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return nil, diskExpect{}, "", err
			}
			gone = append(gone, e.Name())
		}
	}
	if len(gone) == 0 {
		return nil, diskExpect{}, "no index files", nil
	}
	return []string{fmt.Sprintf("deleted %d index files: %s", len(gone), strings.Join(gone, " "))},
		diskExpect{end: active.end(), indexes: true}, "", nil
}

func damageTruncateEpochs(dir string) ([]string, diskExpect, string, error) {
	_, active, err := activeSegment(dir)
	if err != nil {
		return nil, diskExpect{}, "", err
	}
	path := filepath.Join(dir, "leader-epoch-checkpoint")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, diskExpect{}, "no leader-epoch-checkpoint", nil
	}
	if err != nil {
		return nil, diskExpect{}, "", err
	}
	if err := os.Truncate(path, int64(len(data)/2)); err != nil {
		return nil, diskExpect{}, "", err
	}
	return []string{fmt.Sprintf("leader-epoch-checkpoint: truncated from %d to %d bytes: %q -> %q",
		len(data), len(data)/2, data, data[:len(data)/2])}, diskExpect{end: active.end(), epochs: true}, "", nil
}

// parseEpochCheckpoint reads Kafka's leader-epoch-checkpoint text format.
func parseEpochCheckpoint(data []byte) (int, error) {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) < 2 || lines[0] != "0" {
		return 0, fmt.Errorf("bad header %q", data)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return 0, fmt.Errorf("count %q for %d entries", lines[1], len(lines)-2)
	}
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 2 {
			return 0, fmt.Errorf("entry %q", l)
		}
		for _, x := range f {
			if _, err := strconv.ParseInt(x, 10, 64); err != nil {
				return 0, fmt.Errorf("entry %q", l)
			}
		}
	}
	return n, nil
}

// ---- the run ----

type diskRun struct {
	*faultRun
	hits       map[int]int // cases each node was the victim of
	lastVictim int
	// sealedBad: nodes left with a damaged sealed segment (c2) that
	// startup recovery does not see; later follower victims avoid them so
	// the damage lasts until the final reads.
	sealedBad map[int]bool

	injected   int // partition directories damaged
	skipped    int
	recoveries int // recovery lines checked
	overCut    int // recoveries that cut more than the damage called for
	damaged    []diskDamage
}

// diskDamage records where a batch was damaged, to name it if it is ever
// served.
type diskDamage struct {
	caseName  string
	node      int
	partition int32
	batch     string // "base-last"
}

func (d *diskRun) partitionDir(node int, p int32) string {
	return filepath.Join(d.fc.Node(node).DataDir, fmt.Sprintf("%s-%d", d.topic, p))
}

// pickVictim returns the node to damage for role, and why.
func (d *diskRun) pickVictim(role string) (int, string) {
	p, l := d.busiestLeader()
	if l < 0 {
		l = d.fc.LiveIDs()[0]
		return l, fmt.Sprintf("p%d has no live leader; node %d instead", p, l)
	}
	if role == "leader" {
		return l, fmt.Sprintf("leader of busiest partition p%d", p)
	}
	cands := others(d.fc.IDs(), l)
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if d.sealedBad[a] != d.sealedBad[b] {
			return !d.sealedBad[a]
		}
		if d.hits[a] != d.hits[b] {
			return d.hits[a] < d.hits[b]
		}
		return a != d.lastVictim && b == d.lastVictim
	})
	return cands[0], fmt.Sprintf("follower of busiest partition p%d (leader %d)", p, l)
}

// runCase kills a victim, damages it, restarts it and checks its recovery.
func (d *diskRun) runCase(c diskCase) {
	t := d.t
	victim, why := d.pickVictim(c.role)
	d.hits[victim]++
	d.lastVictim = victim
	d.fc.Kill(victim)
	killed := time.Now()
	d.faults++
	d.logf("case %s (%s): SIGKILL node %d, %s; %d acknowledged so far", c.name, c.what, victim, why, d.prod.Acked())

	want := map[int32]diskExpect{}
	for p := range int32(diskPartitions) {
		dir := d.partitionDir(victim, p)
		changes, exp, skip, err := c.damage(dir)
		if err != nil {
			t.Fatalf("case %s: damaging %s on node %d: %v", c.name, dir, victim, err)
		}
		if skip != "" {
			d.skipped++
			d.logf("case %s: node %d p%d left alone: %s", c.name, victim, p, skip)
			continue
		}
		d.injected++
		want[p] = exp
		for _, ch := range changes {
			d.logf("case %s: node %d p%d %s", c.name, victim, p, ch)
			if i := strings.Index(ch, "(batch "); i >= 0 && (c.name == "b" || strings.HasPrefix(c.name, "c")) {
				b, _, _ := strings.Cut(ch[i+len("(batch "):], " ")
				d.damaged = append(d.damaged, diskDamage{c.name, victim, p, b})
			}
		}
	}
	if len(want) == 0 {
		t.Errorf("case %s: no partition of node %d could take the damage", c.name, victim)
	}
	if c.name == "c2" {
		d.sealedBad[victim] = true
	}

	time.Sleep(time.Until(killed.Add(diskDown)))
	logFrom := len(d.fc.Node(victim).readLog())
	st := time.Now()
	d.restartAll(victim)
	d.logf("case %s: node %d restarted and serving after %v", c.name, victim, time.Since(st).Round(10*time.Millisecond))
	healed, ok := d.fc.awaitFullISR(t, d.topic, 60*time.Second)
	if !ok {
		t.Fatalf("case %s: node %d did not rejoin every ISR\n%s", c.name, victim, d.fc.evidence(d.topic, allDiskPartitions(), 80))
	}
	d.logf("case %s: every partition led with a full ISR again %v later", c.name, healed.Round(10*time.Millisecond))
	d.checkRecovery(c, victim, logFrom, want)
}

// diskLogLine is a broker log line about one partition.
type diskLogLine struct {
	Level     string `json:"level"`
	Message   string `json:"message"`
	Topic     string `json:"topic"`
	Partition *int32 `json:"partition"`
	EndOffset *int64 `json:"end_offset"`
	Error     string `json:"error"`
	raw       string
}

// partitionLines returns the victim's log lines since logFrom, by partition
// of the topic.
func (d *diskRun) partitionLines(victim, logFrom int) map[int32][]diskLogLine {
	out := map[int32][]diskLogLine{}
	log := d.fc.Node(victim).readLog()
	if logFrom > len(log) {
		logFrom = 0
	}
	for _, l := range strings.Split(log[logFrom:], "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var ll diskLogLine
		if json.Unmarshal([]byte(l), &ll) != nil || ll.Topic != d.topic || ll.Partition == nil {
			continue
		}
		ll.raw = l
		out[*ll.Partition] = append(out[*ll.Partition], ll)
	}
	return out
}

// checkRecovery checks the victim logged the recovery each damaged
// partition calls for.
func (d *diskRun) checkRecovery(c diskCase, victim, logFrom int, want map[int32]diskExpect) {
	t := d.t
	lines := d.partitionLines(victim, logFrom)
	for p := range int32(diskPartitions) {
		exp, damaged := want[p]
		var rec *diskLogLine
		var epochLine string
		for i, l := range lines[p] {
			if l.Message == diskRecoveredMsg && rec == nil {
				rec = &lines[p][i]
			}
			if strings.Contains(l.Message, "leader-epoch-checkpoint") && strings.Contains(l.Message, "rebuilding") && epochLine == "" {
				epochLine = l.raw
			}
		}
		if rec == nil || rec.EndOffset == nil {
			// Every restart after SIGKILL is an unclean one.
			t.Errorf("case %s: node %d p%d: no %q line with an end offset after the restart", c.name, victim, p, diskRecoveredMsg)
			continue
		}
		got := *rec.EndOffset
		if !damaged {
			d.logf("case %s: node %d p%d (not damaged) recovered to %d", c.name, victim, p, got)
			continue
		}
		d.recoveries++
		switch {
		case got > exp.end && exp.truncate:
			t.Errorf("case %s: node %d p%d recovered to end offset %d, past the first damaged batch at %d: it kept damaged data\n%s",
				c.name, victim, p, got, exp.end, rec.raw)
		case got > exp.end:
			t.Errorf("case %s: node %d p%d recovered to end offset %d, past the last good batch (end %d)\n%s", c.name, victim, p, got, exp.end, rec.raw)
		case got < exp.end:
			d.overCut++
			d.logf("case %s: NOTE node %d p%d recovered to %d, below the %d the damage called for (refetched from the leader, but more than necessary)",
				c.name, victim, p, got, exp.end)
		default:
			how := "intact end kept"
			if exp.truncate {
				how = "cut at the damaged batch"
			}
			d.logf("case %s: node %d p%d recovered to end offset %d (%s)", c.name, victim, p, got, how)
		}
		dir := d.partitionDir(victim, p)
		if exp.epochs {
			if epochLine == "" {
				t.Errorf("case %s: node %d p%d: no rebuilt leader-epoch-checkpoint logged after the restart", c.name, victim, p)
			} else {
				d.logf("case %s: node %d p%d: %s", c.name, victim, p, epochLine)
			}
			data, err := os.ReadFile(filepath.Join(dir, "leader-epoch-checkpoint"))
			if n, perr := parseEpochCheckpoint(data); err != nil || perr != nil {
				t.Errorf("case %s: node %d p%d: leader-epoch-checkpoint after the restart unreadable (%v, %v): %q", c.name, victim, p, err, perr, data)
			} else {
				d.logf("case %s: node %d p%d: leader-epoch-checkpoint readable again, %d entries", c.name, victim, p, n)
			}
		}
		if exp.indexes {
			segs, err := diskSegments(dir)
			var missing []string
			// The active segment's indexes live in memory (written at its
			// roll or a clean close, rebuilt by every unclean start): its
			// files need not be back.
			for i, s := range segs {
				if i == len(segs)-1 {
					continue
				}
				for _, ext := range []string{".index", ".timeindex"} {
					if _, err := os.Stat(strings.TrimSuffix(s.path, ".log") + ext); err != nil {
						missing = append(missing, segName(s)+" "+ext)
					}
				}
			}
			if err != nil || len(missing) > 0 {
				t.Errorf("case %s: node %d p%d: index files not rebuilt (%v): %v", c.name, victim, p, err, missing)
			} else {
				d.logf("case %s: node %d p%d: index files of all %d sealed segments rebuilt", c.name, victim, p, max(len(segs)-1, 0))
			}
		}
	}
}

func allDiskPartitions() []int32 {
	var out []int32
	for p := range int32(diskPartitions) {
		out = append(out, p)
	}
	return out
}

// createDiskTopic creates the topic with small segments and waits for full
// ISRs everywhere.
func (d *diskRun) createDiskTopic() {
	t := d.t
	seg, minISR := strconv.Itoa(diskSegmentBytes), "2"
	cfg := map[string]*string{"segment.bytes": &seg, "min.insync.replicas": &minISR}
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		resp, err := d.fc.Admin(1).CreateTopic(ctx, diskPartitions, 3, cfg, d.topic)
		cancel()
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			break
		}
		if attempt == 3 {
			t.Fatalf("create %q: %v (%s)", d.topic, err, resp.ErrMessage)
		}
		t.Logf("create %q: %v; retrying", d.topic, err)
		time.Sleep(time.Second)
	}
	if _, ok := d.fc.awaitFullISR(t, d.topic, 30*time.Second); !ok {
		t.FailNow()
	}
}

// awaitSealed waits until every partition on every node has at least n
// segments.
func (d *diskRun) awaitSealed(n int, timeout time.Duration) {
	d.fc.Await(d.t, timeout, fmt.Sprintf("%d segments per partition on every node", n), func() (bool, string) {
		var short []string
		for _, id := range d.fc.IDs() {
			for p := range int32(diskPartitions) {
				m, _ := filepath.Glob(filepath.Join(d.partitionDir(id, p), "*.log"))
				if len(m) < n {
					short = append(short, fmt.Sprintf("node %d p%d: %d", id, p, len(m)))
				}
			}
		}
		return len(short) == 0, strings.Join(short, ", ")
	})
}

// ---- reading one node's replica ----

// diskReplica is one node's copy of a partition, read with ReplicaID -2.
type diskReplica struct {
	hw, logStart int64
	recs         []faultRecord
	batches      int
	corrupt      []string // batches failing their CRC (or unparseable)
}

// diskFetch sends one raw Fetch v12 as the debugging consumer.
func diskFetch(conn *rawConn, topic string, p int32, offset int64) (kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -2
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 0, 8<<20
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LastFetchedEpoch = p, -1, offset, -1
	rp.LogStartOffset, rp.PartitionMaxBytes = -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if _, err := conn.Write(conn.frame(req)); err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	buf, err := conn.readFrame(10 * time.Second)
	if err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SetVersion(req.Version)
	if err := parseResponse(buf, conn.corr, resp, true); err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	if resp.ErrorCode != 0 {
		return kmsg.FetchResponseTopicPartition{}, kerr.ErrorForCode(resp.ErrorCode)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("response has %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0], nil
}

// readReplica reads all of node addr's replica of p (from its log start to
// its high watermark), checking every batch's CRC-32C.
func readReplica(addr, topic string, p int32) (diskReplica, error) {
	var r diskReplica
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return r, err
	}
	defer c.Close()
	conn := &rawConn{Conn: c}
	dec := kgo.DefaultDecompressor()
	offset := int64(0)
	for round := 0; ; round++ {
		sp, err := diskFetch(conn, topic, p, offset)
		if err != nil {
			return r, fmt.Errorf("fetch at %d: %w", offset, err)
		}
		if sp.ErrorCode != 0 {
			return r, fmt.Errorf("fetch at %d: %w", offset, kerr.ErrorForCode(sp.ErrorCode))
		}
		r.hw, r.logStart = sp.HighWatermark, sp.LogStartOffset
		if os.Getenv("FJORD_DISK_DEBUG") != "" {
			fmt.Printf("DEBUG %s p%d fetch at %d: hw %d, %d bytes, first base %d\n", addr, p, offset, sp.HighWatermark, len(sp.RecordBatches), firstBase(sp.RecordBatches))
		}
		if round == 0 && r.logStart > 0 {
			return r, fmt.Errorf("log start offset %d, want 0", r.logStart)
		}
		raw := sp.RecordBatches
		from := offset
		if len(raw) == 0 {
			if offset >= r.hw {
				return r, nil
			}
			return r, fmt.Errorf("empty fetch at %d below the high watermark %d", offset, r.hw)
		}
		for len(raw) >= 12 {
			n := int(int32(binary.BigEndian.Uint32(raw[8:12]))) + 12
			if n < 61 || n > len(raw) {
				break // a partial batch at the end is allowed
			}
			batch := raw[:n]
			raw = raw[n:]
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(batch); err != nil || rb.Magic != 2 {
				r.corrupt = append(r.corrupt, fmt.Sprintf("unparseable batch at %d (%v, magic %d)", int64(binary.BigEndian.Uint64(batch)), err, rb.Magic))
				return r, fmt.Errorf("unparseable batch at %d", int64(binary.BigEndian.Uint64(batch)))
			}
			r.batches++
			next := rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
			if crc32.Checksum(batch[21:], castagnoli) != uint32(rb.CRC) {
				r.corrupt = append(r.corrupt, fmt.Sprintf("batch %d-%d (%d bytes) fails its CRC-32C", rb.FirstOffset, next-1, n))
				offset = max(offset, next)
				continue
			}
			data, err := dec.Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&7))
			if err != nil {
				r.corrupt = append(r.corrupt, fmt.Sprintf("batch %d-%d: decompressing: %v", rb.FirstOffset, next-1, err))
				offset = max(offset, next)
				continue
			}
			for i := int32(0); i < rb.NumRecords; i++ {
				l, k := binary.Varint(data)
				if k <= 0 || int(l) < 0 || k+int(l) > len(data) {
					return r, fmt.Errorf("batch %d: record %d malformed", rb.FirstOffset, i)
				}
				var rec kmsg.Record
				if err := rec.ReadFrom(data[:k+int(l)]); err != nil {
					return r, fmt.Errorf("batch %d: record %d: %v", rb.FirstOffset, i, err)
				}
				data = data[k+int(l):]
				if rb.Attributes&0x20 != 0 {
					continue // control record
				}
				r.recs = append(r.recs, faultRecord{Partition: p, Offset: rb.FirstOffset + int64(rec.OffsetDelta), Key: string(rec.Key), Value: string(rec.Value)})
			}
			offset = max(offset, next)
		}
		if offset >= r.hw {
			return r, nil
		}
		if offset == from {
			return r, fmt.Errorf("fetch at %d returned %d bytes but no whole batch", from, len(sp.RecordBatches))
		}
	}
}

// replicaReport is the result of comparing every node's replicas.
type replicaReport struct {
	compared   int // replicas read in the last pass
	batches    int // batches CRC-checked in the last pass
	problems   []string
	corrupt    []string // every corrupt batch ever served (all passes)
	passes     int
	mismatches int
}

// compareReplicas reads every partition from every node until all copies
// agree, end at ends and hold every acknowledged record, or timeout.
func (d *diskRun) compareReplicas(ends map[int32]int64, history []faultAttempt, timeout time.Duration) replicaReport {
	var rep replicaReport
	seenCorrupt := map[string]bool{}
	acked := map[int32][]faultAttempt{}
	for _, a := range history {
		if a.Outcome == faultAcked {
			acked[a.Partition] = append(acked[a.Partition], a)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		rep.passes++
		rep.compared, rep.batches, rep.mismatches = 0, 0, 0
		var problems []string
		leaders, _ := d.fc.Leaders(d.topic)
		for p := range int32(diskPartitions) {
			copies := map[int]diskReplica{}
			for _, id := range d.fc.IDs() {
				r, err := readReplica(d.fc.Addr(id), d.topic, p)
				for _, c := range r.corrupt {
					key := fmt.Sprintf("node %d p%d: %s", id, p, c)
					if !seenCorrupt[key] {
						seenCorrupt[key] = true
						rep.corrupt = append(rep.corrupt, key+d.damageNamed(id, p, c))
					}
				}
				rep.batches += r.batches
				if err != nil {
					problems = append(problems, fmt.Sprintf("node %d p%d: %v", id, p, err))
					continue
				}
				rep.compared++
				copies[id] = r
				if r.hw != ends[p] {
					problems = append(problems, fmt.Sprintf("node %d p%d: high watermark %d, want %d", id, p, r.hw, ends[p]))
				}
				// Every acknowledged record, where it was acknowledged.
				at := make(map[int64]faultRecord, len(r.recs))
				for _, rec := range r.recs {
					at[rec.Offset] = rec
				}
				missing := 0
				var first string
				for _, a := range acked[p] {
					if rec, ok := at[a.Offset]; !ok || rec.Value != strconv.FormatInt(a.Seq, 10) || rec.Key != a.Key {
						if missing == 0 {
							holds := "nothing there"
							if ok {
								holds = rec.String()
							}
							first = fmt.Sprintf("value %d key %s acknowledged at p%d@%d, replica holds %s", a.Seq, a.Key, p, a.Offset, holds)
						}
						missing++
					}
				}
				if missing > 0 {
					problems = append(problems, fmt.Sprintf("node %d p%d: %d acknowledged records missing (first: %s)", id, p, missing, first))
				}
			}
			// The same sequence on every node, compared with the leader's.
			ref := int(leaders[p])
			if _, ok := copies[ref]; !ok {
				ref = 0
				for id := range copies {
					if ref == 0 || id < ref {
						ref = id
					}
				}
			}
			for id, r := range copies {
				if id == ref {
					continue
				}
				if diff := diffRecords(copies[ref].recs, r.recs); diff != "" {
					rep.mismatches++
					problems = append(problems, fmt.Sprintf("p%d: node %d differs from node %d (leader %d): %s", p, id, ref, leaders[p], diff))
				}
			}
		}
		rep.problems = problems
		if len(problems) == 0 && len(rep.corrupt) == 0 {
			return rep
		}
		if time.Now().After(deadline) {
			return rep
		}
		time.Sleep(time.Second)
	}
}

// damageNamed says which injected damage a corrupt batch served at node id
// is, if it is one.
func (d *diskRun) damageNamed(id int, p int32, desc string) string {
	for _, dm := range d.damaged {
		if dm.node == id && dm.partition == p && strings.Contains(desc, "batch "+dm.batch+" ") {
			return fmt.Sprintf(" [the batch case %s damaged on this node]", dm.caseName)
		}
	}
	return ""
}

// diffRecords describes the first difference between two record sequences.
func diffRecords(a, b []faultRecord) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("record %d: %v vs %v", i, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d records vs %d", len(a), len(b))
	}
	return ""
}

// TestFaultDiskCorruption is T4: crash recovery from a damaged disk (see
// the top of this file).
func TestFaultDiskCorruption(t *testing.T) {
	mode := faultMode(t)
	cases := selectDiskCases(t)
	rounds, gap := 1, 1500*time.Millisecond
	if mode == "full" {
		rounds, gap = 2, 4*time.Second
	}
	begin := time.Now()
	fc := startFaultCluster(t, 3)
	d := &diskRun{faultRun: &faultRun{t: t, name: "disk", fc: fc, topic: "faults-disk"}, hits: map[int]int{}, sealedBad: map[int]bool{}}
	logDir := t.TempDir()
	if keep := os.Getenv("FJORD_FAULT_LOGS"); keep != "" {
		t.Cleanup(func() { keepFaultLogs(t, fc, logDir, filepath.Join(keep, t.Name()+"-"+time.Now().Format("150405"))) })
	}
	d.createDiskTopic()
	d.prod = startFaultProducer(t, fc, d.topic, faultRate, logDir)
	d.start = time.Now()
	fc.WaitFor(t, 15*time.Second, func() bool { return d.prod.Acked() >= faultRate })
	d.awaitSealed(3, 45*time.Second)
	d.logf("warm: %d acknowledged, every partition has sealed segments on every node", d.prod.Acked())

	var names []string
	faultStart := time.Now()
	for round := range rounds {
		for _, c := range cases {
			if round == 1 {
				c.role = map[string]string{"leader": "follower", "follower": "leader"}[c.role]
			}
			names = append(names, c.name+":"+c.role)
			d.runCase(c)
			time.Sleep(gap)
		}
	}
	faultTime := time.Since(faultStart)
	d.logf("cases over (%d corruptions in %d cases, %v); producing on for 2s", d.injected, len(names), faultTime.Round(100*time.Millisecond))
	time.Sleep(2 * time.Second)
	d.prod.Stop(45 * time.Second)
	d.logf("producer stopped: %d attempted, %d acknowledged", len(d.prod.History()), d.prod.Acked())

	if _, ok := fc.awaitFullISR(t, d.topic, 60*time.Second); !ok {
		t.Fatalf("the cluster did not recover\n%s", fc.evidence(d.topic, allDiskPartitions(), 80))
	}
	ends := fc.stableEndOffsets(t, d.topic, 30*time.Second)
	d.logf("end offsets %s", fmtOffsets(ends))

	// 1. Everything read back through the leaders, against the history.
	starts := map[int32]kgo.Offset{}
	for p := range ends {
		starts[p] = kgo.NewOffset().At(0)
	}
	cl := newClient(t, fc.AllAddrs()[0], kgo.SeedBrokers(fc.AllAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{d.topic: starts}), kgo.FetchMaxWait(200*time.Millisecond))
	final, fetchErrs, err := readUntilEnds(cl, ends, 30*time.Second)
	cl.Close()
	if len(fetchErrs) > 0 {
		t.Logf("read-back fetch errors: %s", strings.Join(fetchErrs, "; "))
	}
	if err != nil {
		t.Errorf("reading %q back through the leaders: %v", d.topic, err)
	}
	history := d.prod.History()
	if os.Getenv("FJORD_FAULT_LOGS") != "" {
		writeFaultData(t, logDir, history, final)
	}
	rep := checkFaultHistory(history, final)

	// 2. Every node's own copy, batch by batch.
	reps := d.compareReplicas(ends, history, 20*time.Second)
	d.logf("replicas: %d read in pass %d, %d batches CRC-checked, %d problems, %d corrupt batches served",
		reps.compared, reps.passes, reps.batches, len(reps.problems), len(reps.corrupt))

	t.Logf("FAULT FIGURES disk-corruption [%s]: acked=%d read=%d lost=%d (client-false-acks=%d) dup=%d reordered=%d unexpected=%d misplaced=%d indefinite(landed/not)=%d/%d definite-failed=%d attempted=%d | cases=%s corruptions=%d skipped=%d recoveries-checked=%d over-truncated=%d | replicas-compared=%d replica-mismatches=%d replica-problems=%d served-corrupt-batches=%d batches-crc-checked=%d | kills=%d fault-phase=%v duration=%v",
		mode, rep.Acked, rep.Read, rep.Lost, rep.FalseAcks, rep.Dup, rep.Reordered, rep.Unexpected, rep.Misplaced,
		rep.IndefLanded, rep.IndefNotLanded, rep.Definite, rep.Attempted, strings.Join(names, ","), d.injected, d.skipped,
		d.recoveries, d.overCut, reps.compared, reps.mismatches, len(reps.problems), len(reps.corrupt), reps.batches,
		d.faults, faultTime.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))
	if errs := failureCounts(history); errs != "" {
		t.Logf("producer failures by error: %s", errs)
	}

	failed := false
	if !rep.OK() {
		failed = true
		t.Errorf("history check failed: %s\n%s", rep.Figures(), rep.Details())
	}
	if rep.Acked == 0 {
		failed = true
		t.Errorf("nothing was acknowledged")
	}
	if len(reps.corrupt) > 0 {
		failed = true
		t.Errorf("%d batches failing their CRC were served by the debugging consumer's fetch:\n%s", len(reps.corrupt), strings.Join(reps.corrupt, "\n"))
	}
	if len(reps.problems) > 0 {
		failed = true
		t.Errorf("the replicas did not converge on the leaders' data within 20s:\n%s", strings.Join(reps.problems, "\n"))
	}
	if dl := d.prod.DataLoss(); len(dl) > 0 {
		t.Logf("franz-go detected data loss (OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID) on: %s", strings.Join(dl, "; "))
	}
	if failed || t.Failed() {
		t.Logf("fault events:\n%s", strings.Join(d.events, "\n"))
		t.Logf("node logs:\n%s", fc.evidence(d.topic, allDiskPartitions(), 150))
	}
}

func firstBase(b []byte) int64 {
	if len(b) < 8 {
		return -1
	}
	return int64(binary.BigEndian.Uint64(b))
}
