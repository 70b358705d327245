package storage

import "testing"

// DecodeTxnIndex reads back what the log writes, and refuses a torn
// entry, another version, or markers out of order: a tiered copy's
// .txnindex must never read as fewer aborts than it holds.
func TestDecodeTxnIndex(t *testing.T) {
	es := []AbortedTxn{{ProducerID: 1, FirstOffset: 3, LastOffset: 9, LastStableOffset: 3}, {ProducerID: 2, FirstOffset: 5, LastOffset: 12, LastStableOffset: 13}}
	var b []byte
	for _, a := range es {
		b = appendTxnEntry(b, a)
	}
	got, err := DecodeTxnIndex(b)
	if err != nil || len(got) != 2 || got[0] != es[0] || got[1] != es[1] {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	if got, err := DecodeTxnIndex(nil); err != nil || len(got) != 0 {
		t.Fatalf("empty: %+v, %v", got, err)
	}
	bad := map[string][]byte{
		"torn":               b[:len(b)-1],
		"version":            append([]byte{0, 1}, b[2:]...),
		"out of order":       append(appendTxnEntry(nil, es[1]), appendTxnEntry(nil, es[0])...),
		"first after marker": appendTxnEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: 10, LastOffset: 9, LastStableOffset: 3}),
	}
	for name, in := range bad {
		if got, err := DecodeTxnIndex(in); err == nil {
			t.Errorf("%s: decoded %+v", name, got)
		}
	}
	// CollectAborted: Kafka's search of one index.
	found, complete := CollectAborted(es, 10, 14)
	if complete || len(found) != 1 || found[0] != es[1] {
		t.Fatalf("collect [10, 14): %+v %t", found, complete)
	}
	if found, complete = CollectAborted(es, 0, 4); !complete || len(found) != 1 || found[0] != es[0] {
		t.Fatalf("collect [0, 4): %+v %t", found, complete)
	}
}
