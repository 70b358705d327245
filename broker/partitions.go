package broker

import (
	"context"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/metrics"
	"github.com/fjordlog/fjord/broker/partitions"
	"github.com/fjordlog/fjord/broker/partitions/fetchsession"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/broker/txn"
	"github.com/fjordlog/fjord/broker/txncoord"
)

// partitionsHost is what the data path's APIs (their room:
// broker/partitions — Produce, Fetch, ListOffsets, DeleteRecords,
// OffsetForLeaderEpoch, the log-dir keys, DescribeProducers) need of the
// broker. Every method reads b when called, never when the registry is
// built, so a registry built for a nil or partial broker (the tests'
// static registry, withImage(&Broker{}, ...)) binds without touching it.
type partitionsHost struct{ b *Broker }

var _ partitions.Host = partitionsHost{}

func (h partitionsHost) Replicas() *replicamgr.Manager { return h.b.replicas }
func (h partitionsHost) Metrics() *metrics.Metrics     { return h.b.metrics }
func (h partitionsHost) Remote() partitions.RemoteLog  { return h.b.remote }

func (h partitionsHost) ProduceQuota(cc *api.Conn, req *kmsg.ProduceRequest, respond func(kmsg.Response)) func(kmsg.Response) {
	return h.b.quotas.produce(cc, req, respond) // quota.go
}

func (h partitionsHost) FetchQuota(cc *api.Conn, req *kmsg.FetchRequest, respond func(kmsg.Response)) func(kmsg.Response) {
	return h.b.quotas.fetch(cc, req, respond) // quota.go
}

func (h partitionsHost) VerifyTxnProduce(ctx context.Context, id string, req *kmsg.ProduceRequest) map[txn.TopicPartition]int16 {
	return txncoord.VerifyProduce(ctx, txnHost{h.b}, id, req) // the transaction room's check
}

func (h partitionsHost) CleanupPolicyHas(t *replicamgr.Topic, policy string) bool {
	return h.b.policyHas(t, policy) // loops.go
}

func (h partitionsHost) FetchSessions() *fetchsession.Cache { return h.b.fetchSessions }

func (h partitionsHost) FetchAuthz(cc *api.Conn) *api.Authz {
	az := h.b.authorizer()
	if az == nil {
		return nil
	}
	return &api.Authz{Conn: cc, Az: az, Key: 1, Denied: h.b.audit.Denied}
}

func (h partitionsHost) LogDirs() (configured, inUse string) { return h.b.cfg.LogDirs, h.b.logDir }
func (h partitionsHost) TopicName(name string, id [16]byte) string {
	return h.b.topicName(name, id)
}
func (h partitionsHost) ReadFailed(p *replica.Partition, err error) { h.b.readFailed(p, err) }
func (h partitionsHost) Code(err error) int16                       { return errorCode(err) }
func (h partitionsHost) Go(fn func()) bool                          { return h.b.goLoop(fn) }
func (h partitionsHost) Log() *zerolog.Logger                       { return &h.b.log }
