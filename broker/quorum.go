package broker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/ctllink"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/active"
	"github.com/fjordlog/fjord/storage"
)

// metadataDir is where the raft log (pebble) lives, named as Kafka names
// its metadata log directory.
const metadataDir = "__cluster_metadata-0"

// metaProperties is the identity file of a data directory, in Kafka's
// format: it ties the directory to one node and one cluster.
const metaProperties = "meta.properties"

// loadIdentity reads or writes meta.properties and returns the cluster id.
// A directory written for another node or cluster is refused rather than
// served. On first start the cluster id is cluster.id if set; otherwise a
// multi-voter cluster derives it from controller.quorum.voters (every node
// computes the same value) and a quorum of one draws a random one.
func loadIdentity(fs storage.FS, dir string, cfg *config.Config) (string, error) {
	path := filepath.Join(dir, metaProperties)
	if _, err := fs.Stat(filepath.Join(dir, "fjord-metadata.json")); err == nil {
		return "", fmt.Errorf("%s holds fjord-metadata.json from a single-node release before the metadata quorum; "+
			"this release cannot read it: keep using the earlier release for that directory, or start with an empty log.dirs", dir)
	}
	b, err := storage.ReadFile(fs, path)
	if errors.Is(err, os.ErrNotExist) {
		id := cfg.ClusterID
		if id == "" && cfg.ControllerQuorumVoters != "" {
			sum := sha256.Sum256([]byte(strings.TrimSpace(cfg.ControllerQuorumVoters)))
			id = base64.RawURLEncoding.EncodeToString(sum[:16])
		} else if id == "" {
			id = newClusterID()
		}
		text := fmt.Sprintf("version=1\nnode.id=%d\ncluster.id=%s\n", cfg.NodeID, id)
		if err := storage.WriteFileSyncFS(fs, path, []byte(text)); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return id, nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	props := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			props[k] = v
		}
	}
	if props["node.id"] != strconv.Itoa(int(cfg.NodeID)) {
		return "", fmt.Errorf("%s: data belongs to node.id %s, configured %d", path, props["node.id"], cfg.NodeID)
	}
	id := props["cluster.id"]
	if id == "" {
		return "", fmt.Errorf("%s: no cluster.id", path)
	}
	if cfg.ClusterID != "" && cfg.ClusterID != id {
		return "", fmt.Errorf("%s: data belongs to cluster %q, configured %q", path, id, cfg.ClusterID)
	}
	return id, nil
}

// newClusterID makes a Kafka-style cluster id: 16 random bytes, base64url.
func newClusterID() string {
	var b [16]byte
	rand.Read(b[:])
	return encodeUUID(b)
}

// activeController is this node's controller role (active.Controller):
// its member of the metadata quorum, which is also its metadata log, the
// active controller that decides while that member leads, and the
// CONTROLLER listener, raft and Kafka halves.
type activeController interface {
	ctllink.MetadataLog
	// Local: Call decides a request in-process, for the broker's client
	// of the active controller.
	ctllink.Local
	// Serve starts deciding and serving the listener's Kafka half.
	Serve()
}

// startQuorum starts this node's controller role, or on a broker-only node
// its follower of the metadata log. ctl is the bound CONTROLLER listener,
// which the controller takes over, or nil for a quorum of one without one
// (the member then listens on a loopback port nobody dials).
func (b *Broker) startQuorum(ctl net.Listener) error {
	if !b.cfg.HasRole("controller") {
		b.meta = ctllink.StartFollower(b.ctx, b.ctl, b.goLoop, b.log)
		return nil
	}
	cfg := b.activeConfig()
	cfg.Listener = ctl
	c, err := active.Start(cfg)
	if err != nil {
		return err
	}
	b.actl, b.meta = c, c
	b.ctlImage.Store(c)
	return nil
}

// activeConfig is this node's controller role's configuration, from cfg.
func (b *Broker) activeConfig() active.Config {
	voters := map[int32]string{}
	vs, _ := config.ParseVoters(b.cfg.ControllerQuorumVoters)
	for _, v := range vs {
		voters[v.ID] = v.Addr
	}
	b.ctlLimits.init(&b.cfg)
	return active.Config{
		NodeID:          b.cfg.NodeID,
		ClusterID:       b.clusterID,
		Voters:          voters,
		Dir:             filepath.Join(b.logDir, metadataDir),
		FS:              b.metaFS,
		TickInterval:    100 * time.Millisecond,
		MaxFrameBytes:   b.cfg.SocketRequestMaxBytes,
		IdleTimeout:     time.Duration(b.cfg.ConnectionsMaxIdleMs) * time.Millisecond,
		Admit:           b.admitController,
		Budget:          b.ctlLimits.budget,
		KafkaHandler:    &connHandler{b: b, ctl: true},
		KafkaVersions:   b.reg.ControllerTable(b.ctlSASLServer != nil),
		TLS:             b.tls.ControllerServer(),
		TLSPrincipal:    b.ctlTLSPrincipal(),
		SASL:            b.ctlSASLServer,
		RaftSASL:        b.ctlSASL,
		FailedAuthDelay: time.Duration(b.cfg.FailedAuthDelayMs) * time.Millisecond,
		AuthorizeRaft:   b.authorizeRaft,
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			return b.tls.DialController(ctx, "tcp", addr)
		},

		BrokerSessionTimeout:         time.Duration(b.cfg.BrokerSessionTimeoutMs) * time.Millisecond,
		NumPartitions:                b.cfg.NumPartitions,
		DefaultReplication:           b.cfg.DefaultReplication,
		DeleteTopicEnable:            b.cfg.DeleteTopicEnable,
		AutoLeaderRebalance:          b.cfg.AutoLeaderRebalance,
		LeaderImbalanceCheckInterval: time.Duration(b.cfg.LeaderImbalanceCheckSecs) * time.Second,
		WatchListeners:               b.cfg.FastFencing,
		ValidateTopicConfig: func(name, value string) error {
			return config.ValidateTopicConfigs(map[string]string{name: value})
		},
		ValidateTopicConfigs: func(configs map[string]string) error {
			return config.CheckTieredTopic(b.live(), nil, configs)
		},
		ACLBinding: func(a controller.ACL) (controller.ACL, error) {
			bd, err := acl.Stored(acl.FromRecord(a))
			return bd.Record(), err
		},
		ACLHost:      acl.NormalizeHost,
		ConfigPolicy: config.Policy(b.live),
		DynamicNumPartitions: func(img *controller.Image) int32 {
			c := config.Live(&b.cfg, img, b.log)
			return c.NumPartitions
		},
		Logger: b.log,
	}
}

// authorizeRaft admits a raft connection to this node's CONTROLLER
// listener (active.Config.AuthorizeRaft). With the authorizer on, its
// principal needs CLUSTER_ACTION on the cluster, which super users have,
// as Kafka's controllers require of each other's raft requests; off, every
// connection the listener authenticated is admitted. An empty metadata log
// has no ACLs, so the voters' own principals must be super users for a new
// quorum to form.
func (b *Broker) authorizeRaft(principal, host string) bool {
	az := b.authorizer()
	if az == nil {
		return true
	}
	return az.Authorize(principal, host, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName)
}

// ctlTLSPrincipal maps a client certificate on the CONTROLLER listener to
// its principal, as the client listeners do; nil when it is not TLS.
func (b *Broker) ctlTLSPrincipal() func(*tls.ConnectionState) string {
	return b.tls.ControllerPrincipal()
}
