package config

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Feature flags (KIP-584), as ApiVersions v3+ reports them and
// UpdateFeatures (57_update_features.go) refuses to change.
//
// Fjord's levels are fixed by the binary, not finalized in the metadata
// log: there is nothing to upgrade to, and each level is one whose meaning
// Fjord implements in full. A level is advertised only when it is
// honoured, because clients act on it:
//
//   - metadata.version 21 (3.9-IV0). The 4.0 levels also mean controller
//     features Fjord lacks (KIP-966's eligible leader replicas, KIP-853's
//     dynamic voters), although Fjord serves 4.x's client surface (Produce
//     v12+, the KIP-848 consumer protocol). No client changes behaviour on
//     this level; tools (kafka-features.sh, describeFeatures) show it.
//   - transaction.version 1 (KIP-1022: flexible __transaction_state
//     records). Fjord writes TxnMetadataValue v1 (broker/txn). Level 2
//     (KIP-890 part 2) is NOT finalized although EndTxn v5's epoch bump and
//     Produce v12's implicit AddPartitionsToTxn are served: at level 2
//     clients also stop sending AddOffsetsToTxn and rely on TxnOffsetCommit
//     v5 to add the group's offsets partition, which Fjord does not do yet.
//     Level 1 changes no client's behaviour: both keep transactions v1 as
//     with no features at all.
//   - group.version 1 (KIP-848): the consumer group protocol,
//     ConsumerGroupHeartbeat, is served (broker/coordinator, group/consumer),
//     so a Java consumer with group.protocol=consumer joins.
//   - share.version 1 (KIP-932): share groups are served (ShareGroupHeartbeat,
//     ShareFetch, ShareAcknowledge; broker/sharefetch, broker/sharecoord).
//     Level 2 (KIP-1191's dead-letter queues) is not. kraft.version is 0:
//     the voter set is static (no KIP-853).
//
// FinalizedFeaturesEpoch is the image version (the metadata log offset
// applied), as Kafka uses its metadata offset: it only grows, so a client
// that keeps the finalized set of the highest epoch it has seen (the Java
// client does) adopts a newer Fjord's levels after an upgrade instead of
// keeping an older node's forever, which a fixed epoch would make it do.

// Feature is one feature's range and finalized level. Invariant:
// MinSupported <= Finalized <= MaxSupported, or Finalized is 0 (not
// finalized: then it is absent from FinalizedFeatures, as in Kafka).
type Feature struct {
	Name                       string
	MinSupported, MaxSupported int16
	Finalized                  int16
}

const (
	MetadataVersionLevel    = 21 // 3.9-IV0
	TransactionVersionLevel = 1
	GroupVersionLevel       = 1 // KIP-848's consumer protocol
	ShareVersionLevel       = 1 // KIP-932's share groups
)

// features is every feature Fjord knows, by name.
var features = []Feature{
	{"group.version", 0, GroupVersionLevel, GroupVersionLevel},
	{"kraft.version", 0, 0, 0},
	{"metadata.version", MetadataVersionLevel, MetadataVersionLevel, MetadataVersionLevel},
	{"share.version", 0, ShareVersionLevel, ShareVersionLevel},
	{"transaction.version", TransactionVersionLevel, TransactionVersionLevel, TransactionVersionLevel},
}

// FeatureByName returns the named feature, ok false for one Fjord does
// not know.
func FeatureByName(name string) (Feature, bool) {
	for _, f := range features {
		if f.Name == name {
			return f, true
		}
	}
	return Feature{}, false
}

// FillFeatures sets resp's feature fields (v3+; kmsg leaves them out of
// older versions). A supported range starting at 0 is sent only to v4+
// requests: older clients fail to decode it (KAFKA-17492, which is why
// ApiVersions v4 exists).
func FillFeatures(resp *kmsg.ApiVersionsResponse, reqVersion int16, epoch int64) {
	resp.SupportedFeatures, resp.FinalizedFeatures = nil, nil
	for _, f := range features {
		if f.MinSupported > 0 || reqVersion >= 4 {
			sf := kmsg.NewApiVersionsResponseSupportedFeature()
			sf.Name, sf.MinVersion, sf.MaxVersion = f.Name, f.MinSupported, f.MaxSupported
			resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		}
		if f.Finalized > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.Name, f.Finalized, f.Finalized
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
	}
	resp.FinalizedFeaturesEpoch = epoch
}
