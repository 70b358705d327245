package quota

import (
	"strings"

	"github.com/fjordlog/fjord/controller"
)

// Kind is what a sensor measures, one per enforced quota key.
type Kind uint8

const (
	Produce    Kind = iota // producer_byte_rate: record-batch bytes produced
	Fetch                  // consumer_byte_rate: record-batch bytes fetched by consumers
	Request                // request_percentage: handler time, in percent of one thread
	Connection             // connection_creation_rate: connections accepted from an ip
)

var kindKeys = [...]string{
	Produce:    controller.QuotaProducerByteRate,
	Fetch:      controller.QuotaConsumerByteRate,
	Request:    controller.QuotaRequestPercentage,
	Connection: controller.QuotaConnectionCreationRate,
}

var kindNames = [...]string{Produce: "produce", Fetch: "fetch", Request: "request", Connection: "connection"}

// String is the kind's name, the type label of the broker's throttle
// metric.
func (k Kind) String() string { return kindNames[k] }

// Key names a sensor: the kind and the entity tags Kafka's metric uses. A
// quota on a user is shared by its client ids; a quota on a default is
// had by each user or client id on its own.
//
// Invariant: User is "" unless HasUser, Client "" unless HasClient; a
// Connection key has only a Client, the ip.
type Key struct {
	Kind         Kind
	User, Client string // "" where the matched entity has no such type
	HasUser      bool
	HasClient    bool // for connections: Client is the ip
}

// String shows the key as its tags, the form the tests print.
func (k Key) String() string {
	var b strings.Builder
	b.WriteString(k.Kind.String())
	if k.HasUser {
		b.WriteString(" user=" + k.User)
	}
	if k.HasClient {
		if k.Kind == Connection {
			b.WriteString(" ip=" + k.Client)
		} else {
			b.WriteString(" client=" + k.Client)
		}
	}
	return b.String()
}

// levels is Kafka's precedence for a (user, client-id), most specific
// first: /config/users/<user>/clients/<client-id>, .../clients/<default>,
// /config/users/<user>, then the same with <default> for the user, then
// /config/clients/<client-id> and /config/clients/<default>.
func levels(user, client string) [8]controller.QuotaEntity {
	u, c, du, dc, none := controller.Named(user), controller.Named(client), controller.DefaultName(), controller.DefaultName(), controller.QuotaName{}
	return [8]controller.QuotaEntity{
		{User: u, ClientID: c}, {User: u, ClientID: dc}, {User: u, ClientID: none},
		{User: du, ClientID: c}, {User: du, ClientID: dc}, {User: du, ClientID: none},
		{User: none, ClientID: c}, {User: none, ClientID: dc},
	}
}

// Active reports whether img has any client quota, so the data path can
// skip all quota work on a cluster without them. img may be nil (no image
// yet: no quotas).
func Active(img *controller.Image) bool { return img != nil && img.HasClientQuotas() }

// shape is the index of e's shape: its position in levels for a user and
// client-id entity (user and client-id each named, default or absent),
// 9 and 10 for a named and the default ip.
func shape(e controller.QuotaEntity) int {
	if e.IP.Set {
		if e.IP.Default {
			return 10
		}
		return 9
	}
	of := func(n controller.QuotaName) int {
		switch {
		case !n.Set:
			return 2
		case n.Default:
			return 1
		}
		return 0
	}
	return of(e.User)*3 + of(e.ClientID)
}

// allShapes looks every shape up.
const allShapes = 1<<11 - 1

// shapes is the set of entity shapes an image has quotas for, so that
// resolve looks up only those: a cluster typically sets one or two kinds
// (a client-id default, some users), and each lookup hashes a whole
// entity. Images are immutable, so the set is worked out once per image.
type shapes struct {
	img  *controller.Image
	mask uint16 // bit shape(e) for every entity e that has a quota
}

func shapesOf(img *controller.Image) *shapes {
	s := &shapes{img: img}
	for _, e := range img.QuotaEntities() {
		s.mask |= 1 << shape(e)
	}
	return s
}

// resolve finds the bound of kind for a (user, client-id), or for an ip
// when kind is Connection (client is then the ip), and the sensor it
// charges, looking up only the entities of the shapes in mask. ok is
// false when no quota applies. REQUIRES: Active(img).
func resolve(img *controller.Image, mask uint16, kind Kind, user, client string) (bound float64, k Key, ok bool) {
	key := kindKeys[kind]
	if kind == Connection {
		for _, e := range [2]controller.QuotaEntity{{IP: controller.Named(client)}, {IP: controller.DefaultName()}} {
			if mask&(1<<shape(e)) == 0 {
				continue
			}
			if v, ok := img.ClientQuotas(e)[key]; ok {
				return v, Key{Kind: kind, Client: client, HasClient: true}, true
			}
		}
		return 0, Key{}, false
	}
	for i, e := range levels(user, client) {
		if mask&(1<<i) == 0 {
			continue
		}
		v, ok := img.ClientQuotas(e)[key]
		if !ok {
			continue
		}
		k := Key{Kind: kind, HasUser: e.User.Set, HasClient: e.ClientID.Set}
		if k.HasUser {
			k.User = user
		}
		if k.HasClient {
			k.Client = client
		}
		return v, k, true
	}
	return 0, Key{}, false
}
