package quorum

import (
	"bytes"
	"testing"
	"testing/cryptotest"

	"github.com/fjordlog/fjord/controller"
)

// A follower replaying what a member applied (record bytes, nothing for
// entries without a record, skipping what does not apply) ends with the
// member's image, version included; and a snapshot shipped mid-way plus the
// rest of the entries gives the same image again.
func TestApplyEntryMatchesMember(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 5)
	n := newNetwork(t, 5, []uint64{1, 2, 3}, nil)
	n.commit(reg(1))
	n.commit(controller.Encode(controller.NewBatch(bigTopic("a", tid(1), 10))))
	mid := n.commit(controller.Encode(controller.NewRecord(controller.SetConfig{Resource: controller.BrokerResource(1), Key: "k", Value: ptr("v")})))
	// Does not apply (duplicate name): skipped, version still advances.
	if err := n.propose(n.waitLeader(), controller.Encode(controller.NewRecord(controller.CreateTopic{Name: "a", ID: tid(9)}))); err != nil {
		t.Fatal(err)
	}
	n.run(50)
	n.commit(controller.Encode(controller.NewBatch(bigTopic("b", tid(2), 3))))

	id := n.ids[0]
	m := n.members[id]
	want, err := EncodeImage(m.Image())
	if err != nil {
		t.Fatal(err)
	}
	// Entries before the first reported one bootstrapped the membership:
	// no records.
	img := new(controller.Image)
	if first := n.applied[id][0].Index; first > 1 {
		if img, err = noop(img, first-1); err != nil {
			t.Fatal(err)
		}
	}
	var atMid []byte
	var atMidIdx uint64
	var rest []Applied
	for _, a := range n.applied[id] {
		var data []byte
		if a.Kind == KindRecord {
			data = a.Data
		}
		if img, err = ApplyEntry(img, a.Index, data); err != nil {
			t.Fatalf("entry %d: %v", a.Index, err)
		}
		if a.Index == mid {
			if atMid, err = EncodeImage(img); err != nil {
				t.Fatal(err)
			}
			atMidIdx = a.Index
		} else if a.Index > mid {
			rest = append(rest, a)
		}
	}
	if img.Version() != m.Image().Version() {
		t.Fatalf("follower at %d, member at %d", img.Version(), m.Image().Version())
	}
	got, _ := EncodeImage(img)
	if !bytes.Equal(got, want) {
		t.Fatal("follower image differs from the member's")
	}
	img2, err := DecodeImage(atMid, atMidIdx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rest {
		var data []byte
		if a.Kind == KindRecord {
			data = a.Data
		}
		if img2, err = ApplyEntry(img2, a.Index, data); err != nil {
			t.Fatal(err)
		}
	}
	got2, _ := EncodeImage(img2)
	if !bytes.Equal(got2, want) || img2.Version() != img.Version() {
		t.Fatal("snapshot + tail differs from the member's image")
	}
	if _, err := ApplyEntry(img2, img2.Version()+2, nil); err == nil {
		t.Fatal("a gap in the entries was accepted")
	}
}
