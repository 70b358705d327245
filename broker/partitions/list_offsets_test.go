package partitions

import "testing"

// TestTimestampSupported checks ListOffsets' special timestamps against the
// versions that introduced them (Kafka's
// ReplicaManager.timestampMinSupportedVersion, with v0 kept for -1 and -2).
func TestTimestampSupported(t *testing.T) {
	since := map[int64]int16{-1: 0, -2: 0, -3: 7, -4: 8, -5: 9, -6: 11}
	for v := int16(0); v <= 11; v++ {
		for ts := int64(-8); ts <= 2; ts++ {
			want := ts >= 0
			if first, ok := since[ts]; ok {
				want = v >= first
			}
			if got := timestampSupported(ts, v); got != want {
				t.Errorf("ListOffsets v%d timestamp %d supported: %v, want %v", v, ts, got, want)
			}
		}
		if !timestampSupported(1<<62, v) {
			t.Errorf("ListOffsets v%d: a far future timestamp refused", v)
		}
	}
}
