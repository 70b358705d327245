// Package config is a node's configuration: what it runs with, how each
// key is parsed, and how the dynamic configs of the metadata image layer
// over the static ones. It holds no broker state: every function takes the
// static Config, an image or an encoder, so the broker's side is a few
// one-line calls (b.live(), config.Live in the replica manager's
// Reconfigure, config.Policy for the active controller).
//
// It is also the room of the configuration APIs: DescribeConfigs,
// AlterConfigs, IncrementalAlterConfigs (with the BROKER_LOGGER
// resource) and UpdateFeatures, one file each, NN_name.go, headed by its
// versions and behaviour and holding its registration for the node's API
// registry (package broker/api, APIEntries). Alterations are forwarded to
// the active controller through api.Forward, their passwords sealed
// first; what they need of the node is APIHost (broker/confighost.go
// implements it).
//
// Files:
//
//   - config.go: Config (one field per Kafka key, documented beside it),
//     Default, Validate, the quorum checks, ParseVoters, ParseListeners.
//   - listeners.go: listener names as Kafka matches them,
//     listener.security.protocol.map (ParseProtocolMap, the map in force,
//     ListenerProtocol) and the check that every listener has a protocol.
//   - keys.go: the key table (Keys, LookupKey): every broker key Fjord
//     implements, its default, documentation, setter and whether it is
//     dynamic; cmd/fjord applies it to start-up sources, Live to the
//     image's dynamic configs. keys_ssl.go, keys_oauth.go,
//     keys_password.go, keys_authz.go and keys_limits.go are its ssl.*,
//     sasl.oauthbearer.*, password.encoder.*, authorizer and connection
//     limit rows; keys_remote.go the tiered-storage rows (remote.log.*,
//     log.local.retention.*, Aiven's rsm.config.*: RemoteStorage) and a
//     topic's resolved tiering settings (TieringFor).
//   - topics.go: the topic configs Fjord implements (TopicKeys), their
//     validation at creation, their broker defaults and a topic's
//     replica.Settings (SettingsFor).
//   - groups.go: the group configs (resource type GROUP, KIP-848 and
//     KIP-932; GroupKeys): their checks for the controller's policy, and
//     a group's effective values (GroupValue, GroupSettingsOf: override,
//     else the broker default). keys_groups.go holds the group.* broker
//     keys they default to and are bounded by (ShareGroupConfig).
//   - dynamic.go: the layers (static, cluster default, this node), key
//     synonyms, Live (the running configuration as a function of the
//     static one and the image) and the AlterConfigs policy the active
//     controller judges by (Policy).
//   - passwords.go: password-type dynamic configs, stored only as
//     ciphertext: sealing before forwarding, the controller's check,
//     opening for use.
//   - features.go: the KIP-584 feature levels, fixed by the binary.
//   - api.go: APIHost, APIEntries, and the rules' shared checks (config
//     resources, changes to super.users).
//   - 32_describe_configs.go, 33_alter_configs.go,
//     44_incremental_alter_configs.go, 57_update_features.go: the APIs.
//   - loggers.go: the BROKER_LOGGER resource (the node's one logger,
//     log4j's level names).
//
// catalogue/ is Apache Kafka's own list of keys, broker and topic (group
// configs are not in it: groups.go lists Kafka's whole GroupConfig), and
// what Fjord does with each key it does not implement.
//
// Invariant: the package never imports the broker; it knows the metadata
// image only through controller.Image, and the node only through APIHost.
package config
