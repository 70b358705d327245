package active

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Config configures a node's controller role: where its quorum member
// keeps its log and listens, and what the active controller decides with.
// It is a plain struct the broker fills from its own configuration (the
// Kafka property each field comes from is named); this package reads no
// flags or files.
type Config struct {
	// The quorum member and the CONTROLLER listener.

	// NodeID is this node's node.id.
	NodeID int32
	// Voters maps every voter's node.id to the host:port of its CONTROLLER
	// listener (controller.quorum.voters), this node included. Empty means
	// a quorum of one: this node alone.
	Voters map[int32]string
	// ClusterID is the cluster's id, for DescribeCluster on the CONTROLLER
	// listener (describe.go).
	ClusterID string
	// Dir is the metadata log's directory (raft's log, hard state and
	// snapshots, in pebble).
	Dir string
	// FS holds Dir; nil is the operating system's file system. Tests
	// give pebble's strict in-memory one to model a power loss.
	FS vfs.FS
	// Listener is the bound CONTROLLER listener, which Start takes over
	// (Close closes it; the caller may close it earlier to stop accepting).
	// Raft connections and Kafka's share it. nil only for a quorum of one:
	// the member then listens on a loopback port nobody dials, and there is
	// no Kafka half.
	Listener net.Listener
	// TLS, if set, makes the CONTROLLER listener TLS (an SSL listener in
	// listener.security.protocol.map): called per connection, so a
	// reloaded certificate serves new connections. The handshake is done
	// before the listener tells raft's connections from Kafka's (mux.go).
	TLS func() *tls.Config
	// Dial, if set, is how raft connects to the other voters' CONTROLLER
	// listeners (with TLS when they are; node.Config.Dial). nil dials
	// plain TCP.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// SASL, if set, makes the CONTROLLER listener SASL (SASL_PLAINTEXT or
	// SASL_SSL): its Kafka half authenticates as a client listener does,
	// and a raft connection authenticates after its preamble
	// (raftauth.go). RaftSASL is this voter's identity on the other
	// voters' listeners (sasl.mechanism.controller.protocol); set with
	// SASL. FailedAuthDelay delays a refusal
	// (connection.failed.authentication.delay.ms).
	SASL            protocol.Authenticator
	RaftSASL        sasl.Mechanism
	FailedAuthDelay time.Duration
	// AuthorizeRaft, if set, decides whether a raft connection may reach
	// raft, before it does: it gets the connection's principal (the SASL
	// principal on a SASL listener, else the TLS client certificate's
	// through TLSPrincipal, else User:ANONYMOUS) and the remote IP. A
	// refused connection is closed. nil admits every connection the
	// listener authenticated (mux.go).
	AuthorizeRaft func(principal, host string) bool
	// TLSPrincipal maps a TLS client certificate to its principal
	// (ssl.principal.mapping.rules), as on a client listener, for raft's
	// connections and the Kafka half's alike; nil, or "" for a connection
	// without a certificate, means User:ANONYMOUS unless SASL names them.
	TLSPrincipal func(*tls.ConnectionState) string
	// TickInterval is the raft tick; 0 means 100ms.
	TickInterval time.Duration
	// MaxFrameBytes bounds a request on the listener's Kafka half
	// (socket.request.max.bytes; 0 means Kafka's default, 100 MiB);
	// IdleTimeout closes its idle connections (connections.max.idle.ms; 0
	// never does).
	MaxFrameBytes int32
	IdleTimeout   time.Duration
	// Admit and Budget bound what strangers can make the Kafka half hold,
	// as on a client listener (protocol.ServerConfig): the connections
	// it accepts and the request bytes it buffers. nil: no bound.
	Admit  func(remote net.Addr) (ok bool, delay time.Duration, release func())
	Budget *protocol.Budget
	// KafkaHandler and KafkaVersions serve the listener's Kafka half:
	// required with a Listener. They are the broker's one dispatch
	// (broker/dispatch.go), which authorizes and audits every request
	// through the same registry as the client listeners before it reaches
	// Answer; this package serves no Kafka request by itself, so no request
	// can reach the controller unauthorized.
	KafkaHandler  protocol.Handler
	KafkaVersions protocol.Versions

	// The decisions.

	// BrokerSessionTimeout is how long a broker may go without a heartbeat
	// before it is fenced (broker.session.timeout.ms). > 0.
	BrokerSessionTimeout time.Duration
	// NumPartitions and DefaultReplication are what a CreateTopics asking
	// for -1 gets (num.partitions, default.replication.factor). >= 1.
	NumPartitions      int32
	DefaultReplication int16
	// DeleteTopicEnable allows DeleteTopics (delete.topic.enable); false
	// answers TOPIC_DELETION_DISABLED.
	DeleteTopicEnable bool
	// AutoLeaderRebalance moves leaderships back to preferred replicas
	// every LeaderImbalanceCheckInterval (auto.leader.rebalance.enable,
	// leader.imbalance.check.interval.seconds; the interval is > 0 when
	// rebalancing is on).
	AutoLeaderRebalance          bool
	LeaderImbalanceCheckInterval time.Duration
	// WatchListeners fences a broker whose listeners refuse connections
	// (its process is gone) at once rather than after its session
	// (watch.go; fjord.controller.fast.fencing.enable).
	WatchListeners bool
	// ValidateTopicConfig checks one topic config given at creation; an
	// error makes the topic INVALID_CONFIG. nil accepts every config.
	ValidateTopicConfig func(name, value string) error
	// ValidateTopicConfigs checks a new topic's configs as a whole, after
	// ValidateTopicConfig passed each (controller.Defaults.ValidateConfigs);
	// nil accepts them.
	ValidateTopicConfigs func(configs map[string]string) error
	// ACLBinding checks one CreateAcls creation as the broker does
	// (broker/acl: Kafka's rules, a "*" or IP host) and returns the binding
	// as it is stored, its host in normal form; an error makes that
	// creation INVALID_REQUEST with the error's text. ACLHost is the normal
	// form of a host (broker/acl.NormalizeHost), in which DeleteAcls
	// filters compare hosts, so a filter selects bindings stored in
	// another form (before hosts were normalised). nil stores every
	// concrete binding as given and compares hosts as written.
	ACLBinding func(controller.ACL) (controller.ACL, error)
	ACLHost    func(string) string
	// ConfigPolicy judges AlterConfigs and IncrementalAlterConfigs: which
	// keys exist, their types and which may change at run time.
	ConfigPolicy controller.ConfigPolicy
	// DynamicNumPartitions, if set, is num.partitions as the image's
	// dynamic broker configs make it for this node (a topic created
	// without a count gets it); nil means NumPartitions.
	DynamicNumPartitions func(img *controller.Image) int32
	// Logger gets role changes and decisions (Info), fencing (Warn), and
	// the quorum member's and the listener's own lines.
	Logger zerolog.Logger
}

// validateQuorum checks the fields Start needs, then the rest, and fills
// in defaults.
func (c *Config) validateQuorum() error {
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = 100 << 20
	}
	var errs []error
	if c.NodeID < 0 {
		errs = append(errs, fmt.Errorf("active: NodeID %d: must be >= 0", c.NodeID))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("active: Dir is empty"))
	}
	if c.Listener != nil && (c.KafkaHandler == nil || c.KafkaVersions == nil) {
		errs = append(errs, errors.New("active: a CONTROLLER listener needs KafkaHandler and KafkaVersions (the broker's dispatch)"))
	}
	if _, ok := c.Voters[c.NodeID]; len(c.Voters) > 0 && !ok {
		errs = append(errs, fmt.Errorf("active: node %d is not a voter", c.NodeID))
	}
	if c.Listener == nil && len(c.Voters) > 1 {
		errs = append(errs, errors.New("active: a quorum of several voters needs a Listener"))
	}
	if (c.SASL == nil) != (c.RaftSASL == nil) {
		errs = append(errs, errors.New("active: SASL and RaftSASL go together"))
	}
	if c.MaxFrameBytes < 0 || c.IdleTimeout < 0 || c.TickInterval < 0 {
		errs = append(errs, errors.New("active: MaxFrameBytes, IdleTimeout and TickInterval must be >= 0"))
	}
	return errors.Join(append(errs, c.validate())...)
}

func (c *Config) validate() error {
	var errs []error
	if c.BrokerSessionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("active: BrokerSessionTimeout %v: must be > 0", c.BrokerSessionTimeout))
	}
	if c.NumPartitions < 1 {
		errs = append(errs, fmt.Errorf("active: NumPartitions %d: must be >= 1", c.NumPartitions))
	}
	if c.DefaultReplication < 1 {
		errs = append(errs, fmt.Errorf("active: DefaultReplication %d: must be >= 1", c.DefaultReplication))
	}
	if c.AutoLeaderRebalance && c.LeaderImbalanceCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("active: LeaderImbalanceCheckInterval %v: must be > 0", c.LeaderImbalanceCheckInterval))
	}
	return errors.Join(errs...)
}
