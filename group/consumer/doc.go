// Package consumer is the state machine of one consumer group under
// KIP-848's protocol (ConsumerGroupHeartbeat). See the full documentation
// below (written last).
package consumer
