package config

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// UpdateFeatures: v0-2
//
// Behaviour:
//   - Fjord's feature levels are fixed by the binary (features.go), so
//     the one update that succeeds is to the level already in force (a
//     no-op, also for an unfinalized feature asked to stay at 0). Anything
//     else is INVALID_UPDATE_VERSION with a message saying what is fixed;
//     an unknown feature likewise. Decided by this broker alone: every
//     node of one binary has the same levels, and nothing is written.
//   - As in Kafka's controller the request is one decision: the first
//     refused update is the top-level error and message, and nothing
//     changes; on success every feature gets a NONE result (before v2).
//   - ValidateOnly (v1+) is honoured trivially: a successful update
//     changes nothing either way.
//   - An upgrade type Kafka does not know (not 1-3) is refused, as Kafka
//     does.
//
// Version notes:
//   - v1: upgrade type replaces allow-downgrade, validate only (KIP-778)
//   - v2: the response has no per-feature results (top-level error only)
func updateFeaturesEntry() api.Entry {
	return api.Entry{
		Key: 57, Client: api.Versions(0, 2), Handle: handleUpdateFeatures,
		Rule:    api.Needs("ALTER on CLUSTER", 5, api.ClusterTop(acl.OpAlter)),
		Mutates: true,
	}
}

func handleUpdateFeatures(_ *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	for _, u := range req.FeatureUpdates {
		if err := checkFeatureUpdate(req.Version, u); err != nil {
			resp.ErrorCode = kerr.InvalidUpdateVersion.Code
			resp.ErrorMessage = kmsg.StringPtr(err.Error())
			respond(resp)
			return
		}
	}
	if req.Version < 2 {
		for _, u := range req.FeatureUpdates {
			r := kmsg.NewUpdateFeaturesResponseResult()
			r.Feature = u.Feature
			resp.Results = append(resp.Results, r)
		}
	}
	respond(resp)
}

// checkFeatureUpdate returns why u cannot be applied, nil for a no-op.
func checkFeatureUpdate(version int16, u kmsg.UpdateFeaturesRequestFeatureUpdate) error {
	if version >= 1 && (u.UpgradeType < 1 || u.UpgradeType > 3) {
		return fmt.Errorf("fjord: invalid update of %s to %d: unknown upgrade type %d (1 upgrade, 2 safe downgrade, 3 unsafe downgrade)",
			u.Feature, u.MaxVersionLevel, u.UpgradeType)
	}
	f, ok := FeatureByName(u.Feature)
	if !ok {
		return fmt.Errorf("fjord: invalid update of %s to %d: fjord does not know this feature", u.Feature, u.MaxVersionLevel)
	}
	level := u.MaxVersionLevel
	if version == 0 {
		level = max(level, 0) // v0: a level below 1 asks to delete the feature
	}
	if level == f.Finalized {
		return nil
	}
	return fmt.Errorf("fjord: invalid update of %s to %d: fjord's %s is fixed at %d by the binary; it changes only with a Fjord upgrade",
		u.Feature, u.MaxVersionLevel, u.Feature, f.Finalized)
}
