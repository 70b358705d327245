package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/config/catalogue"
)

var update = flag.Bool("update", false, "rewrite the generated part of docs/configuration.md")

const (
	docBegin = "<!-- BEGIN GENERATED: go test ./cmd/fjord -run TestConfigurationDoc -update -->"
	docEnd   = "<!-- END GENERATED -->"
)

// TestConfigurationDoc checks that the key tables of docs/configuration.md
// are what the key table of this package and the catalogue say; with
// -update it rewrites them.
func TestConfigurationDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	before, rest, ok1 := strings.Cut(text, docBegin)
	_, after, ok2 := strings.Cut(rest, docEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the %q ... %q markers", path, docBegin, docEnd)
	}
	want := before + docBegin + "\n" + renderConfigDoc() + docEnd + after
	if want == text {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date: run go test ./cmd/fjord -run TestConfigurationDoc -update", path)
}

// renderConfigDoc writes the tables: Fjord's broker keys, Fjord's topic
// keys, then every other Kafka key by class.
func renderConfigDoc() string {
	var b strings.Builder
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	code := func(s string) string { return "`" + s + "`" }

	fmt.Fprintf(&b, "\n## Supported keys\n\n")
	fmt.Fprintf(&b, "Fjord implements these %d broker keys. Defaults come from `config.Default()` (broker/config); \"(none)\" means the key has no value unless a source gives one. The keys marked *dynamic* can also be changed on a running cluster, per broker or cluster-wide, with IncrementalAlterConfigs (`kafka-configs.sh --alter --entity-type brokers`); the change is stored in the metadata log and applied without a restart (see docs/operations.md). The others are read-only at run time.\n\n", len(configKeys))
	b.WriteString("| Key | Default | Dynamic | Meaning |\n| --- | --- | --- | --- |\n")
	for _, k := range configKeys {
		def := "(none)"
		if k.Def != "" {
			def = code(k.Def)
		}
		dyn := ""
		if k.Dynamic {
			dyn = "dynamic"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", code(k.Name), def, dyn, cell(k.Doc))
	}

	topics := config.TopicConfigNames()
	fmt.Fprintf(&b, "\n## Topic configs\n\n")
	fmt.Fprintf(&b, "Set at creation (CreateTopics) or on a live topic (IncrementalAlterConfigs, AlterConfigs: `kafka-configs.sh --alter --entity-type topics`); each defaults to the broker key beside it. These %d are implemented:\n\n", len(topics))
	b.WriteString("| Topic config | Broker default from |\n| --- | --- |\n")
	for _, tc := range topics {
		from := code(tc[1])
		switch {
		case strings.HasSuffix(tc[0], ".replication.throttled.replicas"):
			from = "(none: default empty, no replica throttled; `*` or `partition:broker,...`)"
		case tc[0] == "remote.storage.enable":
			from = "(none: default `false`; tiering also needs `remote.log.storage.system.enable`)"
		case tc[1] == "":
			from = "(none: Fjord's own topic config, default `false`)"
		}
		fmt.Fprintf(&b, "| %s | %s |\n", code(tc[0]), from)
	}
	b.WriteString("\nAny other topic config of Kafka's is accepted and kept with the topic when ignoring it is safe (the broker logs a warning naming the ones it does not act on), and refused with `INVALID_CONFIG` when it is not; see the tables below. A config that is not Kafka's is `INVALID_CONFIG`.\n")

	fmt.Fprintf(&b, "\n## Group configs\n\n")
	b.WriteString("Per-group dynamic configs (KIP-848, KIP-932): resource type GROUP, set with IncrementalAlterConfigs or AlterConfigs (`kafka-configs.sh --alter --entity-type groups --entity-name g --add-config share.auto.offset.reset=earliest`) and read with DescribeConfigs (`--describe`). They are stored in the metadata log, so every node has them and they survive restarts; they may be set before a group exists, and deleting a group leaves them, as in Kafka. A group runs with its override of a key, else the broker default beside it. An override must lie within the bounds the broker keys beside it set (checked by the active controller; `INVALID_CONFIG` naming the bound), and a group's session timeout must exceed its heartbeat interval. APPEND and SUBTRACT are `INVALID_CONFIG` (no key is a list), and so is a key not listed here.\n\n")
	b.WriteString("| Group config | Type | Default from | Bounds |\n| --- | --- | --- | --- |\n")
	var refusedGroup []string
	for _, k := range config.GroupKeys() {
		if k.Refused != "" {
			refusedGroup = append(refusedGroup, code(k.Name))
			continue
		}
		from := code(k.BrokerKey)
		if k.BrokerKey == "" {
			from = "(none: default " + code(k.Def) + ")"
		}
		bounds := ""
		if lo, hi := k.BoundKeys(); lo != "" {
			bounds = fmt.Sprintf("[%s, %s]", code(lo), code(hi))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", code(k.Name), k.Type, from, bounds)
	}
	fmt.Fprintf(&b, "\nKafka 4.2's streams-group keys (%s) are refused with `INVALID_CONFIG`: Fjord serves no streams groups (KIP-1071). `share.delivery.count.limit` and `share.partition.max.record.locks` are Kafka 4.3's (KIP-1240), taken here for share groups.\n", strings.Join(refusedGroup, ", "))

	implemented := map[catalogue.Scope]map[string]bool{catalogue.Broker: {}, catalogue.Topic: {}}
	for _, k := range configKeys {
		implemented[catalogue.Broker][k.Name] = true
	}
	for _, tc := range topics {
		implemented[catalogue.Topic][tc[0]] = true
	}
	type row struct{ scope, name, why string }
	byClass := map[catalogue.Class][]row{}
	var refusedValues []row
	counts := map[catalogue.Scope]int{}
	for _, scope := range []catalogue.Scope{catalogue.Broker, catalogue.Topic} {
		for _, k := range catalogue.Keys(scope) {
			if implemented[scope][k.Name] {
				continue
			}
			counts[scope]++
			r := catalogue.Describe(scope, k.Name)
			byClass[r.Class] = append(byClass[r.Class], row{scope.String(), k.Name, r.Why})
			if r.RefuseWhen != "" && r.Class != catalogue.Refused {
				refusedValues = append(refusedValues, row{scope.String(), k.Name, "refused when " + r.RefuseWhen + ": " + r.RefuseWhy})
			}
		}
	}
	for _, p := range catalogue.VendorPrefixes() {
		r := catalogue.Describe(catalogue.Broker, p)
		scope := "broker"
		if _, ok := catalogue.Classify(catalogue.Topic, p+"x", ""); ok {
			scope = "broker, topic"
		}
		byClass[r.Class] = append(byClass[r.Class], row{scope, p + "*", r.Why})
	}
	for _, name := range catalogue.LegacyKeys() {
		r := catalogue.Describe(catalogue.Broker, name)
		byClass[catalogue.Refused] = append(byClass[catalogue.Refused], row{"broker", name, r.RefuseWhy})
	}

	fmt.Fprintf(&b, "\n## Kafka's other keys\n\n")
	fmt.Fprintf(&b, "The catalogue (`broker/config/catalogue/kafka_keys.tsv`, from Apache Kafka 3.9 and 4.0's own definitions) holds %d broker and %d topic keys; Fjord implements the ones above and treats the other %d broker and %d topic keys as below. A key in no list stops start-up, naming the nearest real key.\n\n",
		len(catalogue.Keys(catalogue.Broker)), len(catalogue.Keys(catalogue.Topic)), counts[catalogue.Broker], counts[catalogue.Topic])
	b.WriteString("- **Ignored**: no meaning for Fjord. Accepted; start-up logs one line listing every ignored setting it was given.\n")
	b.WriteString("- **Not supported yet**: means something Fjord does not do yet, and ignoring it is safe. Accepted with a warning for each one given.\n")
	b.WriteString("- **Refused**: ignoring it would be unsafe. Start-up stops (a topic config: `INVALID_CONFIG`).\n")
	b.WriteString("\nA value is still checked against Kafka's type for the key (`num.network.threads=many` stops start-up).\n")
	section := func(title string, rows []row) {
		fmt.Fprintf(&b, "\n### %s (%d)\n\n| Key | Scope | Why |\n| --- | --- | --- |\n", title, len(rows))
		for _, r := range rows {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", code(r.name), r.scope, cell(r.why))
		}
	}
	section("Refused", byClass[catalogue.Refused])
	section("Refused for some values", refusedValues)
	section("Not supported yet", byClass[catalogue.Unsupported])
	section("Ignored", byClass[catalogue.Ignored])
	b.WriteString("\n")
	return b.String()
}
