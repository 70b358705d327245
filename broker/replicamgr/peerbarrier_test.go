package replicamgr

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A peer reports its image version only when asked, and only a well-formed
// tag counts: no answer, no tag (a broker that does not know it) or a
// damaged value means ask again.
func TestImageVersionTag(t *testing.T) {
	ask := kmsg.NewPtrMetadataRequest()
	ask.Version = 12 // tags need a flexible version (v9+), which brokers negotiate
	ask.UnknownTags.Set(TagImageVersion, nil)

	// The tag survives the wire both ways, as between two brokers.
	wire := ask.AppendTo(nil)
	got := kmsg.NewPtrMetadataRequest()
	got.Version = ask.Version
	if err := got.ReadFrom(wire); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = got.Version
	PutImageVersion(got, resp, 1<<40+7)
	back := kmsg.NewPtrMetadataResponse()
	back.Version = resp.Version
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if v, ok := imageVersion(back); !ok || v != 1<<40+7 {
		t.Fatalf("version %d %v, want %d", v, ok, uint64(1<<40+7))
	}

	// A client's request, without the tag, gets no tag.
	plain := kmsg.NewPtrMetadataResponse()
	PutImageVersion(kmsg.NewPtrMetadataRequest(), plain, 9)
	if _, ok := imageVersion(plain); ok {
		t.Fatal("a request without the tag got the version")
	}
	damaged := kmsg.NewPtrMetadataResponse()
	damaged.UnknownTags.Set(TagImageVersion, []byte{0x80})
	for name, r := range map[string]*kmsg.MetadataResponse{"no answer": nil, "no tag": plain, "damaged": damaged} {
		if _, ok := imageVersion(r); ok {
			t.Errorf("%s: reported a version", name)
		}
	}
}
