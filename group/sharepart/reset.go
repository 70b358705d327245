package sharepart

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ResetKind is a share.auto.offset.reset strategy.
type ResetKind int8

const (
	// ResetLatest starts at the partition's end offset (Kafka's default).
	ResetLatest ResetKind = iota
	// ResetEarliest starts at the log start offset.
	ResetEarliest
	// ResetByDuration starts at the first record no older than the
	// duration (ListOffsets by timestamp now - Duration; the end offset if
	// there is none).
	ResetByDuration
)

// AutoOffsetReset is a parsed share.auto.offset.reset: where a share group
// that has no state for a partition starts consuming it. The broker
// resolves it to an offset against the log and passes that to New.
type AutoOffsetReset struct {
	Kind     ResetKind
	Duration time.Duration // for ResetByDuration; >= 0
}

// Timestamp is the ListOffsets timestamp to resolve r at now (Unix ms):
// -1 (latest), -2 (earliest), or now minus the duration.
func (r AutoOffsetReset) Timestamp(now int64) int64 {
	switch r.Kind {
	case ResetEarliest:
		return -2
	case ResetByDuration:
		return now - r.Duration.Milliseconds()
	}
	return -1
}

func (r AutoOffsetReset) String() string {
	switch r.Kind {
	case ResetEarliest:
		return "earliest"
	case ResetByDuration:
		return "by_duration:" + isoDuration(r.Duration)
	}
	return "latest"
}

// ParseAutoOffsetReset parses share.auto.offset.reset as Kafka 4.2 does:
// "latest", "earliest" or "by_duration:" followed by a non-negative ISO-8601
// duration of the form PnDTnHnMn.nS (java.time.Duration.parse), all case
// insensitive. The empty string is the default, latest.
func ParseAutoOffsetReset(s string) (AutoOffsetReset, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	switch {
	case v == "" || v == "latest":
		return AutoOffsetReset{Kind: ResetLatest}, nil
	case v == "earliest":
		return AutoOffsetReset{Kind: ResetEarliest}, nil
	case strings.HasPrefix(v, "by_duration:"):
		d, err := parseISODuration(strings.TrimPrefix(v, "by_duration:"))
		if err != nil {
			return AutoOffsetReset{}, fmt.Errorf("sharepart: share.auto.offset.reset %q: %w", s, err)
		}
		if d < 0 {
			return AutoOffsetReset{}, fmt.Errorf("sharepart: share.auto.offset.reset %q: negative duration", s)
		}
		return AutoOffsetReset{Kind: ResetByDuration, Duration: d}, nil
	}
	return AutoOffsetReset{}, fmt.Errorf("sharepart: share.auto.offset.reset %q: want earliest, latest or by_duration:PnDTnHnMn.nS", s)
}

// isoDurationRE is java.time.Duration's grammar, lower-cased.
var isoDurationRE = regexp.MustCompile(`^([-+]?)p(?:([-+]?[0-9]+)d)?(t(?:([-+]?[0-9]+)h)?(?:([-+]?[0-9]+)m)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?s)?)?$`)

func parseISODuration(s string) (time.Duration, error) {
	m := isoDurationRE.FindStringSubmatch(s)
	if m == nil || m[3] == "t" || (m[2] == "" && m[3] == "") {
		return 0, fmt.Errorf("bad ISO-8601 duration %q", s)
	}
	var total float64 // seconds; float to see overflow instead of wrapping
	for _, part := range []struct {
		digits string
		unit   float64
	}{{m[2], 86400}, {m[4], 3600}, {m[5], 60}, {m[6], 1}} {
		if part.digits == "" {
			continue
		}
		n, err := strconv.ParseInt(part.digits, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad ISO-8601 duration %q: %w", s, err)
		}
		total += float64(n) * part.unit
	}
	nanos := int64(0)
	if m[7] != "" {
		frac := m[7] + strings.Repeat("0", 9-len(m[7]))
		nanos, _ = strconv.ParseInt(frac, 10, 64)
		if strings.HasPrefix(m[6], "-") {
			nanos = -nanos
		}
	}
	if m[1] == "-" {
		total, nanos = -total, -nanos
	}
	if math.Abs(total) > float64(math.MaxInt64/int64(time.Second))-1 {
		return 0, fmt.Errorf("ISO-8601 duration %q out of range", s)
	}
	return time.Duration(total)*time.Second + time.Duration(nanos), nil
}

func isoDuration(d time.Duration) string {
	if d == 0 {
		return "PT0S"
	}
	return "PT" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S"
}
