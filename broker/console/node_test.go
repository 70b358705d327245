package console

import (
	"fmt"
	"testing"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// A tailed record takes its batch's timestamp under LogAppendTime, clips
// keys, values and header names to n bytes, and shows at most
// maxTailHeaders headers and then how many more there were.
func TestTailRecord(t *testing.T) {
	var hs [][2][]byte
	for i := range maxTailHeaders + 3 {
		hs = append(hs, [2][]byte{[]byte(fmt.Sprintf("header-%d", i)), nil})
	}
	r := recordbatch.Record{TimestampDelta: 5, OffsetDelta: 2, Key: []byte("key-long"), Value: nil, Headers: hs}
	info := recordbatch.Info{BaseTimestamp: 1000, MaxTimestamp: 9000}
	cr := tailRecord(r, 42, info, 3)
	if cr.Offset != 42 || !cr.Timestamp.Equal(time.UnixMilli(1005)) {
		t.Errorf("offset %d at %v, want 42 at 1005 ms", cr.Offset, cr.Timestamp)
	}
	if string(cr.Key.Data) != "key" || cr.Key.Len != 8 || !cr.Value.Null {
		t.Errorf("key %+v value %+v, want key clipped to 3 of 8 bytes and a null value", cr.Key, cr.Value)
	}
	if len(cr.Headers) != maxTailHeaders+1 || cr.Headers[0].Key != "hea" || cr.Headers[maxTailHeaders].Key != "(3 more headers)" {
		t.Errorf("headers %+v, want %d clipped ones and (3 more headers)", cr.Headers, maxTailHeaders)
	}
	info.LogAppendTimed = true
	if cr := tailRecord(r, 42, info, 3); !cr.Timestamp.Equal(time.UnixMilli(9000)) {
		t.Errorf("LogAppendTime: at %v, want the batch's max timestamp 9000 ms", cr.Timestamp)
	}
}

// Under-replicated leaves out the replicas a move removes.
func TestUnderReplicated(t *testing.T) {
	for _, tc := range []struct {
		p    controller.Partition
		want bool
	}{
		{controller.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, false},
		{controller.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, true},
		{controller.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Removing: []int32{3}}, false},
	} {
		if got := underReplicated(tc.p); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.p, got, tc.want)
		}
	}
}

// Identity and Clients read only the values and funcs they are given: no
// servers yet (the console starts before the client listeners) is no
// clients.
func TestNodeSourceIdentity(t *testing.T) {
	s := &NodeSource{ClusterID: "c1", NodeID: 7, Servers: func() []*protocol.Server { return nil }}
	if id, node := s.Identity(); id != "c1" || node != 7 {
		t.Errorf("Identity: %q %d", id, node)
	}
	if cs, n := s.Clients(10); len(cs) != 0 || n != 0 {
		t.Errorf("Clients with no servers: %v %d", cs, n)
	}
}
