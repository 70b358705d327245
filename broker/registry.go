package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/admin"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/discovery"
	"github.com/fjordlog/fjord/broker/partitions"
	"github.com/fjordlog/fjord/broker/sasl"
	"github.com/fjordlog/fjord/broker/sharecoord"
	"github.com/fjordlog/fjord/broker/sharefetch"
	"github.com/fjordlog/fjord/broker/txncoord"
)

// The broker's registry of API keys (package broker/api): everything
// Fjord knows about one key is one api.Entry, built once per node by that
// key's registration — its NN_name.go file here, or the room package
// that owns it — and bound to the host it runs on. Every listener serves
// through dispatch (dispatch.go), which reads nothing but the node's
// registry: ApiVersions, the front end's version check, authorization,
// audit and the handler all come from the same entry, so an API cannot be
// served without its rule, and a listener cannot be served without the
// authorizer.

// handlerFunc is a root handler: an api.Handler that still takes the
// whole broker. Rooms bind their own narrow hosts instead.
type handlerFunc func(b *Broker, cc *api.Conn, req kmsg.Request, respond func(kmsg.Response))

// rootEntries are the registrations of the keys whose handlers live in
// this package, filled by init functions in the NN_name.go files.
var rootEntries []func(b *Broker) api.Entry

func register(f func(b *Broker) api.Entry) { rootEntries = append(rootEntries, f) }

// bind makes a root handler an api.Handler for b.
func bind(b *Broker, h handlerFunc) api.Handler {
	return func(cc *api.Conn, req kmsg.Request, respond func(kmsg.Response)) { h(b, cc, req, respond) }
}

// newRegistry builds b's registry. Building binds and never calls: a nil b
// gives the static registry the tests read.
func newRegistry(b *Broker) *api.Registry {
	es := make([]api.Entry, 0, len(rootEntries))
	for _, f := range rootEntries {
		es = append(es, f(b))
	}
	es = append(es, coordinator.Entries(groupsHost{b})...)
	es = append(es, admin.Entries(adminHost{forwarder{b}})...)
	es = append(es, discovery.Entries(discoveryHost{b})...)
	es = append(es, sasl.Entries()...)
	es = append(es, config.APIEntries(configHost{forwarder{b}})...)
	es = append(es, txncoord.Entries(txnHost{b})...)
	es = append(es, partitions.Entries(partitionsHost{b})...)
	es = append(es, sharecoord.Entries(shareCoordAPIHost{b})...)
	es = append(es, sharefetch.Entries(shareFetchAPIHost{b})...)
	r, err := api.NewRegistry(es...)
	if err != nil {
		panic(fmt.Sprintf("broker: %v", err)) // a programming error, caught by every test
	}
	return r
}
