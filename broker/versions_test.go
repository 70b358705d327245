package broker

import (
	"flag"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/protocol/fjordmsg"
)

// Protocol currency: every key Fjord serves is served up to the newest
// version kmsg (the franz-go release in go.mod, which follows Kafka's
// releases) knows, unless the tables below say why not; and every key kmsg
// knows is either served or absent for a recorded reason. Upgrading kmsg
// makes this fail for each key Kafka moved on, so a new version is a
// decision, not an accident.

// lagging is why a served key stops below kmsg's newest version, by
// listener ("client" or "controller") and key.
var lagging = map[string]map[int16]string{
	"client": {},
	"controller": {
		1:  "Fetch of __cluster_metadata by Fjord's own broker-only nodes (ctllink), which speak v12; no other client reads the metadata log",
		63: "BrokerHeartbeat v2 carries cordoned log directories (KIP-1066); Fjord has no cordoning",
	},
}

// absent is why a key kmsg knows is not served on any listener.
var absent = map[int16]string{
	4: "ZooKeeper-era controller-to-broker (LeaderAndIsr): KRaft replaced it with the metadata log",
	5: "ZooKeeper-era controller-to-broker (StopReplica)", 6: "ZooKeeper-era controller-to-broker (UpdateMetadata)",
	7:  "ZooKeeper-era ControlledShutdown: KRaft brokers shut down through BrokerHeartbeat",
	38: "delegation tokens (KIP-48) are not implemented", 39: "delegation tokens (KIP-48) are not implemented",
	40: "delegation tokens (KIP-48) are not implemented", 41: "delegation tokens (KIP-48) are not implemented",
	52: "KRaft's raft RPC: Fjord's quorum runs etcd/raft over its own transport", 53: "KRaft's raft RPC",
	54: "KRaft's raft RPC", 55: "DescribeQuorum: Fjord's quorum is etcd/raft; `fjord cluster` and /metrics describe it",
	58: "Envelope: Fjord forwards admin requests as themselves (broker/api/forward.go)",
	64: "UnregisterBroker: a node leaves by its heartbeats ending",
	70: "ControllerRegistration: the voter set is static (kraft.version 0)",
	73: "AssignReplicasToDirs: one log directory per node (JBOD is not implemented)",
	74: "ListConfigResources (KIP-1142): not implemented yet",
	80: "dynamic raft voters (KIP-853): the voter set is static", 81: "dynamic raft voters (KIP-853)", 82: "dynamic raft voters (KIP-853)",
	88: "KIP-1071 streams groups: not implemented", 89: "KIP-1071 streams groups: not implemented",
	93: "KIP-1071 streams groups: not implemented",
	94: "UnregisterController: the voter set is static",
}

func TestVersionCoverage(t *testing.T) {
	reg := newRegistry(nil)
	tables := map[string]func(int16) (int16, int16, bool){
		"client":     reg.ClientTable().Supported,
		"controller": reg.ControllerTable(true).Supported,
	}
	served := map[int16]bool{}
	for listener, supported := range tables {
		for key, why := range lagging[listener] {
			if _, _, ok := supported(key); !ok {
				t.Errorf("%s key %d (%s) is recorded as lagging (%q) but is not served there", listener, key, fjordmsg.AnyNameForKey(key), why)
			}
		}
		for _, key := range reg.Keys() {
			_, max, ok := supported(key)
			if !ok {
				continue
			}
			served[key] = true
			req := fjordmsg.AnyRequestForKey(key)
			if req == nil {
				t.Errorf("%s key %d is served but unknown to kmsg", listener, key)
				continue
			}
			why, recorded := lagging[listener][key]
			switch newest := req.MaxVersion(); {
			case max > newest:
				t.Errorf("%s %s: advertises v%d, newer than kmsg's v%d", listener, fjordmsg.AnyNameForKey(key), max, newest)
			case max < newest && !recorded:
				t.Errorf("%s %s: advertises up to v%d, kmsg knows v%d: serve it, or record why not in lagging", listener, fjordmsg.AnyNameForKey(key), max, newest)
			case max == newest && recorded:
				t.Errorf("%s %s: served at kmsg's newest v%d, but still recorded as lagging (%q): drop the entry", listener, fjordmsg.AnyNameForKey(key), max, why)
			}
		}
	}
	for key := int16(0); key < math.MaxInt16; key++ { // Kafka's keys and Fjord's private ones (protocol/fjordmsg)
		req := fjordmsg.AnyRequestForKey(key)
		why, recorded := absent[key]
		switch {
		case req == nil && recorded:
			t.Errorf("key %d is recorded as absent but kmsg does not know it", key)
		case req == nil:
		case served[key] && recorded:
			t.Errorf("%s is served, but recorded as absent (%q): drop the entry", fjordmsg.AnyNameForKey(key), why)
		case !served[key] && !recorded:
			t.Errorf("%s (key %d, kmsg v%d) is neither served nor recorded as absent", fjordmsg.AnyNameForKey(key), key, req.MaxVersion())
		}
	}
}

var updateVersionsDoc = flag.Bool("update-versions-doc", false, "rewrite the generated table of docs/api-versions.md")

const versionsDocBegin = "<!-- BEGIN GENERATED: go test ./broker -run TestVersionsDoc -update-versions-doc -->"

// versionsTable renders what the registry serves, key by key, beside
// kmsg's newest version and the recorded reasons, as docs/api-versions.md
// shows it.
func versionsTable() string {
	reg := newRegistry(nil)
	client, ctl := reg.ClientTable(), reg.ControllerTable(true)
	var b strings.Builder
	b.WriteString("| Key | API | Client listeners | CONTROLLER listener | Newest (kmsg) | Notes |\n| --- | --- | --- | --- | --- | --- |\n")
	rng := func(supported func(int16) (int16, int16, bool), key int16) string {
		if min, max, ok := supported(key); ok {
			return fmt.Sprintf("%d–%d", min, max)
		}
		return "—"
	}
	for key := int16(0); key < math.MaxInt16; key++ { // Kafka's keys and Fjord's private ones (protocol/fjordmsg)
		req := fjordmsg.AnyRequestForKey(key)
		if req == nil {
			continue
		}
		var notes []string
		for _, l := range []string{"client", "controller"} {
			if why, ok := lagging[l][key]; ok {
				notes = append(notes, l+": "+why)
			}
		}
		if why, ok := absent[key]; ok {
			notes = append(notes, why)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %d | %s |\n", key, fjordmsg.AnyNameForKey(key), rng(client.Supported, key), rng(ctl.Supported, key),
			req.MaxVersion(), strings.Join(notes, "; "))
	}
	return b.String()
}

// TestVersionsDoc keeps docs/api-versions.md the registry's versions.
func TestVersionsDoc(t *testing.T) {
	checkGenerated(t, "../docs/api-versions.md", versionsDocBegin, versionsTable(), *updateVersionsDoc,
		"go test ./broker -run TestVersionsDoc -update-versions-doc")
}
