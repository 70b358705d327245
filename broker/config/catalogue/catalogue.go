// Package catalogue is the list of Apache Kafka's own configuration keys,
// broker and topic, and what Fjord does with each key it does not
// implement: ignore it (it has no meaning here), warn about it (it means
// something Fjord does not do yet), or refuse it (ignoring it would be
// unsafe).
//
// Why a catalogue: users adopt Fjord by swapping the image of a compose file
// written for Kafka, and such files carry JVM, ZooKeeper, metric-reporter
// and vendor settings that Fjord has no use for. Refusing every key Fjord
// does not implement stops those files; accepting every key hides typos. So
// a key is judged against Kafka's real list: a real Kafka key is ignored or
// warned about, a key in no list stops start-up (and the caller suggests
// the nearest real key).
//
// The list itself, kafka_keys.tsv, was extracted once from Apache Kafka's
// ConfigDef definitions (see the file's header); this package adds only the
// classification, in rules.go. Which keys Fjord implements is not decided
// here: the parent package, broker/config, owns those tables (broker keys,
// topic keys), and it and cmd/fjord consult the catalogue only for the keys
// Fjord does not implement.
package catalogue

import (
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Scope says where a key is set: on the broker (server.properties, the
// environment) or on a topic (CreateTopics, AlterConfigs).
type Scope uint8

const (
	Broker Scope = iota
	Topic
)

func (s Scope) String() string {
	if s == Topic {
		return "topic"
	}
	return "broker"
}

// Key is one of Kafka's configuration keys as Kafka defines it.
type Key struct {
	Scope Scope
	Name  string
	// Type is Kafka's ConfigDef type: boolean, string, int, short, long,
	// double, list, class or password.
	Type string
	// Default is Kafka's default rendered as text; "" when Kafka has none.
	Default string
	// Internal keys are defined but left out of Kafka's documentation.
	Internal bool
	// Versions lists the Kafka releases of the catalogue that define the
	// key: "3.9", "4.0" or "3.9,4.0".
	Versions string
}

// Class is what Fjord does with a Kafka key it does not implement.
type Class uint8

const (
	// Ignored keys have no meaning for Fjord (JVM, ZooKeeper, thread and
	// buffer sizing, metric reporters, vendor services). They are accepted
	// and listed together in one start-up line.
	Ignored Class = iota + 1
	// Unsupported keys mean something Fjord does not do yet; ignoring them
	// is safe. Each one given gets a warning naming it.
	Unsupported
	// Refused keys (or values) would be unsafe to ignore: an authorizer
	// that is not there, a listener that would look secure and is not. A
	// refused key stops start-up (a topic key: INVALID_CONFIG).
	Refused
)

func (c Class) String() string {
	switch c {
	case Ignored:
		return "ignored"
	case Unsupported:
		return "not supported yet"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Verdict is a key's class for a given value, and why, in a phrase that
// fits after the key's name in a log line.
type Verdict struct {
	Class Class
	Why   string
}

//go:embed kafka_keys.tsv
var keysTSV string

// keys holds Kafka's keys by scope, sorted by name. Loaded once at init;
// read-only afterwards.
var keys = func() [2][]Key {
	ks, err := parseTSV(keysTSV)
	if err != nil {
		panic("catalogue: kafka_keys.tsv: " + err.Error())
	}
	return ks
}()

func parseTSV(text string) ([2][]Key, error) {
	var out [2][]Key
	header := false
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cells := strings.Split(line, "\t")
		if !header {
			header = true
			if cells[0] != "scope" {
				return out, fmt.Errorf("line %d: want the header line first", i+1)
			}
			continue
		}
		if len(cells) != 6 {
			return out, fmt.Errorf("line %d: %d cells, want 6", i+1, len(cells))
		}
		k := Key{Name: cells[1], Type: cells[2], Default: cells[3], Internal: cells[4] == "yes", Versions: cells[5]}
		switch cells[0] {
		case "broker":
			k.Scope = Broker
		case "topic":
			k.Scope = Topic
		default:
			return out, fmt.Errorf("line %d: scope %q", i+1, cells[0])
		}
		out[k.Scope] = append(out[k.Scope], k)
	}
	for s := range out {
		sort.Slice(out[s], func(i, j int) bool { return out[s][i].Name < out[s][j].Name })
		for i := 1; i < len(out[s]); i++ {
			if out[s][i].Name == out[s][i-1].Name {
				return out, fmt.Errorf("%s key %q listed twice", Scope(s), out[s][i].Name)
			}
		}
	}
	return out, nil
}

// Keys returns Kafka's keys of a scope, sorted by name. The caller must not
// modify the slice.
func Keys(s Scope) []Key { return keys[s] }

// Lookup finds a Kafka key by name. Per-listener keys
// (listener.name.<listener>.<key>, and <mechanism>.sasl.jaas.config under
// it) are found as the key they refine.
func Lookup(s Scope, name string) (Key, bool) {
	if k, ok := find(s, name); ok {
		return k, true
	}
	if s == Broker {
		if base, ok := listenerBase(name); ok {
			return find(s, base)
		}
	}
	return Key{}, false
}

func find(s Scope, name string) (Key, bool) {
	ks := keys[s]
	i := sort.Search(len(ks), func(i int) bool { return ks[i].Name >= name })
	if i < len(ks) && ks[i].Name == name {
		return ks[i], true
	}
	return Key{}, false
}

// listenerBase strips Kafka's per-listener prefix: listener.name.<l>.<key>
// refines <key> for one listener, and listener.name.<l>.<mechanism>.<key>
// refines a SASL key for one mechanism (lower-case, as in
// listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config).
func listenerBase(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "listener.name.")
	if !ok {
		return "", false
	}
	_, key, ok := strings.Cut(rest, ".")
	if !ok || key == "" {
		return "", false
	}
	if _, known := find(Broker, key); known {
		return key, true
	}
	// listener.name.<l>.<mechanism>.<key>, for the per-mechanism SASL keys.
	if _, mkey, ok := strings.Cut(key, "."); ok && (strings.HasPrefix(mkey, "sasl.") || mkey == "connections.max.reauth.ms") {
		return mkey, true
	}
	return key, true
}

// Classify judges a key that Fjord does not implement, for the value given.
// ok is false when the key is in neither Kafka's list nor a vendor
// namespace Fjord knows of: such a key is a typo or a setting of something
// else, and the caller refuses it.
func Classify(s Scope, name, value string) (v Verdict, ok bool) {
	if r, ok := vendorRule(s, name); ok {
		return r.verdict(value), true
	}
	k, ok := Lookup(s, name)
	if !ok {
		return Verdict{}, false
	}
	return ruleFor(s, k.Name, name).verdict(value), true
}

// CheckValue reports whether v parses as the key's Kafka type, so that a
// value Kafka would refuse is refused even for a key Fjord ignores. Lists,
// strings, classes and passwords take any text.
func CheckValue(k Key, v string) error {
	v = strings.TrimSpace(v)
	bits := 0
	switch k.Type {
	case "short":
		bits = 16
	case "int":
		bits = 32
	case "long":
		bits = 64
	case "double":
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		return nil
	case "boolean":
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return fmt.Errorf("%q is not a boolean (want true or false)", v)
		}
		return nil
	default:
		return nil
	}
	if _, err := strconv.ParseInt(v, 10, bits); err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("%q is out of range for a %d-bit integer", v, bits)
		}
		return fmt.Errorf("%q is not an integer", v)
	}
	return nil
}
