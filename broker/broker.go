package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rs/zerolog"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/console"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/ctllink"
	"github.com/fjordlog/fjord/broker/metrics"
	"github.com/fjordlog/fjord/broker/partitions"
	"github.com/fjordlog/fjord/broker/partitions/fetchsession"
	"github.com/fjordlog/fjord/broker/pwenc"
	"github.com/fjordlog/fjord/broker/quota"
	"github.com/fjordlog/fjord/broker/remotestore"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/broker/sasl"
	"github.com/fjordlog/fjord/broker/sharecoord"
	"github.com/fjordlog/fjord/broker/sharefetch"
	"github.com/fjordlog/fjord/broker/tier"
	"github.com/fjordlog/fjord/broker/tlsconf"
	"github.com/fjordlog/fjord/broker/txncoord"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/active"
	"github.com/fjordlog/fjord/protocol"
	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/remote"
)

// Broker is one Fjord node: a member of the metadata quorum (a voter when
// it has the controller role, and then possibly the active controller),
// and a broker serving the partitions the metadata places on it.
//
// The local replicas live in replicas (broker/replicamgr), which makes
// them follow the metadata images as they arrive.
type Broker struct {
	cfg config.Config // as started: the static configuration
	// tier is the remote log manager (broker/tier), and remote what Fetch
	// and ListOffsets read of the store; nil without Options.RemoteStore.
	// Set in New.
	tier   *tier.Manager
	remote partitions.RemoteLog
	// authzCache is the authorizer of the latest image's ACLs (authz.go);
	// any request goroutine may replace it, all build equal values.
	authzCache atomic.Pointer[authzCache]
	// reg is the node's API registry (registry.go), built in New.
	reg *api.Registry
	// audit is the audit stream (broker/api/audit.go); nil when it is off. Set in New.
	audit *api.Audit
	// liveCfg is cfg with the image's dynamic broker configs applied
	// (config.Live); the replica manager's publish loop is its one writer
	// (replicamgr.Config.Reconfigure). nil until the first image: live()
	// is then cfg.
	liveCfg atomic.Pointer[config.Config]
	log     zerolog.Logger
	// logLevel is the level of log and every logger derived from it
	// (loggers.go); the BROKER_LOGGER "root" sets it.
	logLevel  *nodeLevel
	logDir    string
	clusterID string
	// fs holds every file of the node under log.dirs but the metadata
	// log's (Options.FS; storage.OSFS by default). Set in New, read-only
	// after.
	fs storage.FS
	// metaFS holds the metadata log's files (Options.MetadataFS); nil is
	// the operating system's. Set in New, read-only after.
	metaFS vfs.FS

	meta  ctllink.MetadataLog // the metadata log: actl, or a follower on a broker-only node
	actl  activeController    // this node's controller role; nil without it
	ctl   *ctllink.Client     // requests to the active controller
	ctlLn net.Listener        // the CONTROLLER listener, if any (actl serves it)

	// replicas are the local replicas, the applied image and the node's
	// log files (replicahosts.go wires it). Set in New.
	replicas *replicamgr.Manager
	// fetchSessions are the KIP-227 fetch sessions Fetch keeps
	// (broker/partitions/fetchsession). Set in New.
	fetchSessions *fetchsession.Cache
	// throttles are the replication quotas (throttle.go).
	throttles quota.Replication
	// limits bound the client listeners' connections and request memory (limits.go).
	limits clientLimits
	// ctlLimits bound the CONTROLLER listener's Kafka half (limits.go).
	ctlLimits clientLimits
	// consumerTopics is the topics image KIP-848 groups see (groups.go).
	consumerTopics consumerTopics

	// life registers this broker, heartbeats, holds its broker epoch and
	// does the controlled shutdown (cluster.go wires it). Set in New once
	// the listeners are bound.
	life  *ctllink.Lifecycle
	ready chan struct{} // closed once first unfenced

	// mu guards servers, which Close takes while serveClients may still
	// be making them.
	mu      sync.RWMutex
	servers []*protocol.Server

	// tls are the live TLS configurations of the client listeners and the
	// CONTROLLER listener (served by a controller, dialled by every node);
	// set in New (listeners.go), read-only after.
	tls        *tlsconf.Listeners
	listeners  []net.Listener
	advertised []config.Listener // one per client listener, ports resolved
	// saslServers authenticate each client listener's connections (nil
	// for a listener without SASL); built with the listeners (listeners.go).
	saslServers []protocol.Authenticator
	// interBrokerOpts are this broker's client options towards the
	// others' inter-broker listener (replication, transaction markers):
	// SASL and TLS when it is. Set with saslServers, read-only after;
	// clipped, so callers may append.
	interBrokerOpts []kgo.Opt
	// ctlSASLServer authenticates the CONTROLLER listener's connections
	// (raft's and Kafka's) when it is SASL, on a controller; ctlSASL is this
	// node's identity towards the controllers then. Set with saslServers,
	// read-only after.
	ctlSASLServer protocol.Authenticator
	ctlSASL       kgosasl.Mechanism
	// ctlImage is the controller role once started, for the CONTROLLER
	// listener's SCRAM lookups (which can arrive while Start runs).
	ctlImage atomic.Pointer[active.Controller]

	// passwords encrypts and decrypts the password-type dynamic configs
	// (broker/config/passwords.go); nil without password.encoder.secret. Set in New,
	// read-only after.
	passwords *pwenc.Encoder

	metrics *metrics.Metrics
	quotas  *clientQuotas            // client quota enforcement (quota.go)
	fetch   *replica.Fetchers        // follower replication
	coord   *coordinator.Coordinator // consumer groups and committed offsets
	txns    *txncoord.Coordinator    // transactions
	// shares keeps KIP-932 share-partition state (__share_group_state);
	// shareFetch serves ShareFetch/ShareAcknowledge for the partitions
	// this node leads (shares.go).
	shares     *sharecoord.Coordinator
	shareFetch *sharefetch.Manager
	peers      peerClients // clients to other brokers (WriteTxnMarkers)

	// tasks starts every goroutine of the broker's own (goLoop); Close
	// stops it, which cancels ctx and waits for all of them.
	tasks lifecycle.Group
	// ctx is tasks' context, the root one: cancelled by Close, it stops
	// every loop and background task. stop closes with it, for select
	// statements.
	ctx     context.Context
	stop    <-chan struct{}
	closing atomic.Bool
}

// Options are what a node takes beside its configuration that no
// properties file can say: they are for programs that embed Fjord, such
// as broker/brokertest. The zero value is what New uses.
type Options struct {
	// FS holds every file the node keeps under log.dirs except the
	// metadata log's: the partition logs and their checkpoint files,
	// partition.metadata, meta.properties, and the removal of deleted and
	// stray partition directories. nil is the operating system's
	// (storage.OSFS). brokertest's power-loss mode gives a storage.MemFS,
	// whose CrashClone is what a power cut leaves.
	FS storage.FS
	// MetadataFS holds the metadata log (the raft log, a pebble
	// database, under log.dirs/__cluster_metadata-0). nil is the
	// operating system's, with the modes the raft log gives its files.
	MetadataFS vfs.FS
	// RemoteStore is tiered storage's object store (KIP-405, broker/tier);
	// nil is the S3 store the rsm.config.* keys name when
	// remote.log.storage.system.enable is set, else tiering is off: topics with remote.storage.enable=true then
	// keep every local segment their local retention would delete after
	// upload, until a store is configured.
	RemoteStore remote.Store
	// RemoteTaskInterval overrides remote.log.manager.task.interval.ms.
	RemoteTaskInterval time.Duration
}

// New checks the data directory, binds the listeners and starts the
// node's quorum member; Start begins serving. Its files are on the
// operating system's file system (NewWithOptions takes others).
func New(cfg config.Config, log zerolog.Logger) (*Broker, error) {
	return NewWithOptions(cfg, log, Options{})
}

// NewWithOptions is New with opts.
func NewWithOptions(cfg config.Config, log zerolog.Logger, opts Options) (*Broker, error) {
	level := &nodeLevel{}
	log = nodeLogger(log, level)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, log: log, logLevel: level, ready: make(chan struct{}), fs: storage.OrOS(opts.FS), metaFS: opts.MetadataFS}
	b.reg = newRegistry(b)
	var err error
	if b.passwords, err = config.NewPasswordEncoder(cfg.PasswordEncoder); err != nil {
		return nil, err
	}
	b.ctx = b.tasks.Context()
	b.stop = b.ctx.Done()
	b.metrics = metrics.New(metricsSource{b})
	fsCfg := fetchsession.DefaultConfig()
	fsCfg.Slots = int(cfg.FetchSessionSlots)
	b.fetchSessions = fetchsession.New(fsCfg)
	b.metrics.FetchSessions(func() (sessions, partitions int, evictions uint64) {
		st := b.fetchSessions.Stats()
		return st.Sessions, st.Partitions, st.Evictions
	})
	if opts.RemoteStore == nil && cfg.Remote.Enable {
		// remote.log.storage.system.enable: the S3 store of the rsm.config.*
		// keys (cmd/fjord checked its bucket before calling New).
		if opts.RemoteStore, err = remotestore.Open(b.ctx, &cfg); err != nil {
			return nil, err
		}
	}
	if opts.RemoteTaskInterval == 0 && cfg.Remote.TaskIntervalMs > 0 {
		opts.RemoteTaskInterval = time.Duration(cfg.Remote.TaskIntervalMs) * time.Millisecond
	}
	if opts.RemoteStore != nil {
		// A store given in Options (tests) is remote.log.storage.system.enable
		// as much as one the keys name: the topic rules read it
		// (config.CheckTieredTopic).
		b.cfg.Remote.Enable = true
		tr := newTierRemote(b, opts.RemoteStore)
		b.tier = newTierManager(b, opts.RemoteStore, opts.RemoteTaskInterval, tr.reader)
		b.remote = tr
	}
	b.quotas = newClientQuotas(func() *controller.Image {
		if b.meta == nil {
			return nil
		}
		return b.meta.Image()
	}, b.metrics.Registerer(), log)
	if cfg.AuthorizerClass == config.LegacyAuthorizerClass {
		log.Warn().Str("authorizer.class.name", cfg.AuthorizerClass).Str("serving_as", config.StandardAuthorizerClass).
			Msg("the ZooKeeper-era AclAuthorizer is an alias here: Fjord's authorizer follows StandardAuthorizer's rules")
	}
	if b.audit, err = api.OpenAudit(cfg.AuditLogFile, b.ctx.Done(), log, b.metrics.AuditDropped.Inc); err != nil {
		return nil, err
	}
	if b.audit != nil {
		b.goLoop(b.audit.Run)
	}
	b.logDir = strings.Split(cfg.LogDirs, ",")[0]
	if b.clusterID, err = openDataDir(b.fs, b.logDir, &cfg, log); err != nil {
		return nil, err
	}
	if b.coord, err = b.newCoordinator(); err != nil {
		return nil, err
	}
	if b.txns, err = b.newTxnCoordinator(); err != nil {
		return nil, err
	}
	if b.shares, err = b.newShareCoordinator(); err != nil {
		return nil, err
	}
	b.ctl = newCtlClient(b)
	b.fetch = replica.NewFetchers(b.ctx, fetchHost{b})
	b.replicas = b.newReplicaManager()
	if b.shareFetch, err = sharefetch.NewManager(shareFetchHost{b}, sharefetch.DefaultConfig()); err != nil {
		return nil, err
	}
	if err := b.listen(); err != nil {
		return nil, err
	}
	b.life = newLifecycle(b)
	if err := b.startQuorum(b.ctlLn); err != nil {
		b.closeListeners()
		return nil, err
	}
	if !cfg.HasRole("broker") {
		log.Info().Str("cluster_id", b.clusterID).Msg("controller-only node: no client listener, no replicas")
		return b, nil
	}
	// Open the replicas the log already places here before serving, so a
	// restarted node recovers its logs first.
	start := time.Now()
	b.replicas.Apply(b.meta.Image())
	log.Info().Int("topics", len(b.replicas.Topics())).Dur("took", time.Since(start)).Str("cluster_id", b.clusterID).
		Uint64("metadata_version", b.replicas.AppliedVersion()).Msg("opened logs")
	return b, nil
}

// openDataDir makes the data directory dir ready on fs and returns the
// cluster id its meta.properties names (loadIdentity). The directory is
// created durably: meta.properties, and the partition directories made in
// it later, are synced in dir, which keeps nothing after a power loss if
// dir's own name is not durable in its parent.
func openDataDir(fs storage.FS, dir string, cfg *config.Config, log zerolog.Logger) (string, error) {
	if err := storage.MkdirAllDurable(fs, dir); err != nil {
		return "", fmt.Errorf("log.dirs %s: %w", dir, err)
	}
	warnOpenDataDir(fs, dir, log)
	storage.RemoveDeletedDirsFS(fs, dir)
	return loadIdentity(fs, dir, cfg)
}

// warnOpenDataDir logs, once at start-up, that the data directory lets
// other users in: it holds the records and the metadata log (SCRAM keys,
// ACLs, dynamic passwords). Fjord creates directories 0700 and files 0600
// (storage.DirMode, FileMode), but one made by an older release or by the
// operator keeps its mode: changing it silently could break whoever
// relies on it (a backup agent, a log shipper in the group).
func warnOpenDataDir(fs storage.FS, dir string, log zerolog.Logger) {
	fi, err := fs.Stat(dir)
	if err != nil {
		return // MkdirAll just succeeded; loadIdentity reports what follows
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		log.Warn().Str("log.dirs", dir).Str("mode", fmt.Sprintf("%#o", perm)).
			Msgf("the data directory is open to other users (group or world): it holds the records and the metadata log's SCRAM keys and passwords; Fjord creates new directories 0700 and files 0600 but leaves an existing directory's mode alone: chmod 700 %s", dir)
	}
}

// listen binds every client listener. Listeners named CONTROLLER are for the
// metadata quorum and are not served here.
func (b *Broker) listen() error {
	ls, _ := config.ParseListeners(b.cfg.Listeners)
	var adv []config.Listener
	if b.cfg.AdvertisedListeners != "" {
		adv, _ = config.ParseListeners(b.cfg.AdvertisedListeners)
	}
	for _, l := range ls {
		ln, err := net.Listen("tcp", net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))))
		if err != nil {
			b.closeListeners()
			return fmt.Errorf("listener %s: %w", l.Name, err)
		}
		if b.cfg.IsControllerListener(l.Name) {
			if b.ctlLn != nil {
				ln.Close()
				b.closeListeners()
				return fmt.Errorf("listener %s: only one controller listener is supported", l.Name)
			}
			b.ctlLn = ln
			continue
		}
		b.listeners = append(b.listeners, ln)
		a := config.Listener{Name: l.Name, Host: l.Host, Port: int32(ln.Addr().(*net.TCPAddr).Port), Protocol: b.cfg.ListenerProtocol(l.Name)}
		if a.Host == "" || a.Host == "0.0.0.0" || a.Host == "::" {
			a.Host = "127.0.0.1"
		}
		for _, x := range adv {
			if x.Name == l.Name {
				a.Host, a.Port = x.Host, x.Port
			}
		}
		b.advertised = append(b.advertised, a)
	}
	if len(b.listeners) == 0 && b.cfg.HasRole("broker") {
		b.closeListeners()
		return errors.New("listeners: no client listener (only CONTROLLER)")
	}
	if err := b.secureListeners(); err != nil {
		b.closeListeners()
		return err
	}
	return nil
}

func (b *Broker) closeListeners() {
	for _, ln := range b.listeners {
		ln.Close()
	}
	if b.ctlLn != nil {
		b.ctlLn.Close()
	}
}

// Addrs returns the bound client addresses, for tests and logs.
func (b *Broker) Addrs() []string {
	out := make([]string, len(b.listeners))
	for i, ln := range b.listeners {
		out[i] = ln.Addr().String()
	}
	return out
}

// ControllerAddr is the bound CONTROLLER listener's address, "" without one.
func (b *Broker) ControllerAddr() string {
	if b.ctlLn == nil {
		return ""
	}
	return b.ctlLn.Addr().String()
}

// ActiveController is the node id of the quorum's leader as this node
// knows it, or -1.
func (b *Broker) ActiveController() int32 {
	return b.meta.Leader()
}

// Start joins the cluster and, once the controller has unfenced this
// broker, serves clients. It does not block; Ready reports when serving
// begins. Client connections made before then wait in the accept backlog.
func (b *Broker) Start() {
	if b.actl != nil {
		b.actl.Serve()
	}
	for _, watch := range b.tls.Watchers(b.ctx, true) {
		b.goLoop(watch)
	}
	if !b.cfg.HasRole("broker") {
		close(b.ready) // a controller serves only the CONTROLLER listener
		return
	}
	b.goLoop(b.replicas.PublishLoop)
	b.goLoop(func() { b.life.Run(b.ctx) })
	if b.cfg.MetricsAddr != "" {
		if err := serveMetrics(&b.tasks, b.cfg.MetricsAddr, b.metrics, b.cfg.MetricsPprof, b.log); err != nil {
			b.log.Error().Err(err).Str("addr", b.cfg.MetricsAddr).Msg("metrics listener failed; serving Kafka without it")
		}
	}
	if b.cfg.ConsoleAddr != "" {
		if err := console.Listen(&b.tasks, b.cfg.ConsoleAddr, b.cfg.ConsoleAllowedHosts, consoleSource(b), b.log); err != nil {
			b.log.Error().Err(err).Str("addr", b.cfg.ConsoleAddr).Msg("console listener failed; serving Kafka without it")
		}
	}
	b.goLoop(func() {
		select {
		case <-b.ready:
		case <-b.stop:
			return
		}
		b.serveClients()
		if b.cfg.SASL.ScramBootstrap != "" {
			b.goLoop(func() {
				sasl.BootstrapScram(b.ctx, b.cfg.SASL.ScramBootstrap, sasl.ImageScram(b.image),
					func(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) (*kmsg.AlterUserSCRAMCredentialsResponse, error) {
						return api.ForwardTo[*kmsg.AlterUserSCRAMCredentialsResponse](ctx, forwarder{b}, req, api.UntimedWait, nil)
					}, b.log)
			})
		}
	})
	b.coord.Start()  // the groups' timeouts and offset expiry
	b.txns.Start()   // transaction timeouts, expiry and retries
	b.shares.Start() // share state pruning and cold snapshots
	b.goLoop(b.replicas.TickLoop)
	u := b.upkeep()
	b.goLoop(func() { b.replicas.RetentionLoop(u) })
	b.goLoop(func() { b.replicas.FlushLoop(u) })
	if b.tier != nil {
		b.goLoop(func() { b.tier.Run(b.stop) })
	}
	if b.cfg.CleanerEnable {
		b.goLoop(func() { b.replicas.CleanerLoop(u) })
	}
}

// Ready is closed once the broker serves clients.
func (b *Broker) Ready() <-chan struct{} { return b.ready }

// serveClients starts the client listeners' servers.
func (b *Broker) serveClients() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing.Load() {
		return
	}
	b.limits.init(&b.cfg)
	for i, ln := range b.listeners {
		h := &connHandler{b: b, listener: i}
		tlsCfg, tlsPrincipal := b.tls.Server(b.advertised[i].Name)
		s := protocol.NewServer(protocol.ServerConfig{
			Name:            b.advertised[i].Name,
			TLS:             tlsCfg,
			TLSPrincipal:    tlsPrincipal,
			MaxFrameBytes:   b.cfg.SocketRequestMaxBytes,
			MaxInFlight:     int(b.cfg.NumIOThreads),
			IdleTimeout:     time.Duration(b.cfg.ConnectionsMaxIdleMs) * time.Millisecond,
			DrainTimeout:    30 * time.Second,
			Admit:           b.admitConnection,
			Budget:          b.limits.budget,
			FailedAuthDelay: time.Duration(b.cfg.FailedAuthDelayMs) * time.Millisecond,
			SASL:            b.saslServers[i],
		}, h, b.reg.ClientTable(), b.log.With().Str("listener", b.advertised[i].Name).Logger())
		s.Serve(ln)
		b.servers = append(b.servers, s)
		b.log.Info().Str("listener", b.advertised[i].Name).Str("addr", ln.Addr().String()).
			Str("advertised", net.JoinHostPort(b.advertised[i].Host, strconv.Itoa(int(b.advertised[i].Port)))).
			Str("protocol", b.advertised[i].Protocol).Int32("node_id", b.cfg.NodeID).Msg("serving Kafka clients")
	}
	for _, watch := range b.tls.Watchers(b.ctx, false) {
		b.goLoop(watch)
	}
}

// goLoop is how the broker starts every goroutine of its own: tracked,
// so Close waits for all of them. Once Close cancels the root context it
// starts nothing and reports false.
func (b *Broker) goLoop(fn func()) bool { return b.tasks.Go(fn) }

// Close shuts down cleanly: stop accepting, let in-flight requests finish,
// leave the quorum, flush and close every log.
func (b *Broker) Close() error {
	if !b.closing.CompareAndSwap(false, true) {
		return nil
	}
	if b.cfg.HasRole("broker") {
		b.life.Shutdown()
	}
	b.closeListeners()
	b.mu.Lock()
	servers := b.servers
	b.mu.Unlock()
	for _, s := range servers {
		s.Close()
	}
	b.shareFetch.Close() // its waiting fetches and writes end before the loops are awaited
	b.tasks.Stop()
	b.fetch.CloseAll()
	b.peers.closeAll()
	b.ctl.Close()
	var errs []error
	if err := b.meta.Close(); err != nil {
		errs = append(errs, fmt.Errorf("metadata quorum: %w", err))
	}
	return errors.Join(append(errs, b.replicas.CloseLogs())...)
}
