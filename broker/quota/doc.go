// Package quota is Kafka's quota arithmetic as a pure core: client quotas
// (KIP-13, KIP-219, KIP-612's per-ip connection rate) and replication
// throttles (KIP-73). Nothing here reads a clock (every call takes now),
// starts a goroutine, or knows the broker: the broker reads the image and
// the clock, mutes connections and counts metrics, and asks this package
// what to do.
//
// Files:
//
//   - rate.go: a sensor's rate over Kafka's sampled windows, the throttle
//     time that brings a rate back to its bound, a fetch's window cap.
//   - resolve.go: the kinds of client quota and which entity's quota a
//     (user, client-id) or ip is charged to, by Kafka's precedence,
//     looking up only the entity shapes the image has quotas for.
//   - sensors.go: the bounded sensor table (Sensors) and the broker's
//     shared, locked handle on it (Quotas).
//   - replication.go: the replication token bucket (Bucket) and each
//     side's throttle decision (Throttle).
//   - lists.go: the throttled-replica lists, parsed and cached.
//
// A client request is charged to one sensor, named (Key) by the quota
// entity Kafka's precedence picks for its (user, client-id) from the
// image's quotas: a quota on a user is shared by its client ids, a quota
// on a default is had by each on its own. The rate is measured over
// Kafka's windows; a charge that takes it over the bound gets the delay
// that brings it back, and the broker mutes the connection that long.
// Request and connection throttles are capped at one window, as Kafka's.
//
// Sensors are bounded (MaxSensors): client ids are the client's to
// choose. Over the bound the idle sensors go first, then the least
// recently charged eighth.
//
// Replication throttles hold back, with a token bucket of one second of
// bytes per side, the fetches of listed partitions whose replica is out
// of the ISR; a replica in the ISR is never throttled.
//
// Concurrency: the pure types (Sensors, Bucket) are not safe for
// concurrent use; Quotas and Throttle hold one behind a leaf mutex, held
// for map and arithmetic work only, since the broker's connections charge
// them from their own goroutines.
//
// Tests: datadriven_test.go runs testdata/*.txt (windows, throttle
// times, precedence, shared and per-client sensors, request and
// connection limits, fetch undo, eviction, replication buckets, lists);
// core_test.go has a simulated producer, a randomized check of the
// table's invariants, and a check that the package reads no clock and
// starts no goroutine; bench_test.go times the hot path.
package quota
